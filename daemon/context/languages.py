"""What the daemon reads from a document's language: the comment that heads its context chunks, the line
endings after which a multi-line suggestion may start, and the family whose documents it may copy from.

The language is the editor's languageId (LSP's identifiers: python, typescript, go, ...), else the file's
extension says it; an unknown one falls back to Python's rules (`#`, `:`), which the embedded model was trained
with. Never an error.
"""
from __future__ import annotations

import posixpath

HASH, SLASHES, DASHES = "#", "//", "--"
COMMENTS: dict[str, str] = {
    **dict.fromkeys(("python", "shellscript", "sh", "bash", "zsh", "fish", "ruby", "perl", "r", "yaml", "toml",
                     "dockerfile", "makefile", "powershell", "elixir", "julia", "nim", "coffeescript", "cmake",
                     "dotenv", "properties", "ini", "tcl", "crystal", "gdscript", "starlark"), HASH),
    **dict.fromkeys(("javascript", "javascriptreact", "typescript", "typescriptreact", "go", "rust", "c", "cpp",
                     "csharp", "java", "kotlin", "scala", "swift", "dart", "php", "objective-c", "objective-cpp",
                     "zig", "groovy", "jsonc", "proto", "proto3", "solidity", "vue", "svelte", "d", "v", "odin",
                     "hlsl", "glsl", "wgsl", "cuda-cpp", "fsharp"), SLASHES),
    **dict.fromkeys(("lua", "sql", "haskell", "elm", "ada", "plsql", "purescript", "agda", "idris", "vhdl"), DASHES),
}
EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python", ".sh": "shellscript", ".bash": "shellscript",
    ".zsh": "shellscript", ".rb": "ruby", ".pl": "perl", ".pm": "perl", ".r": "r", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".ps1": "powershell", ".ex": "elixir", ".exs": "elixir", ".jl": "julia", ".nim": "nim",
    ".cmake": "cmake", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascriptreact",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "typescriptreact", ".go": "go",
    ".rs": "rust", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".cs": "csharp", ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".swift": "swift",
    ".dart": "dart", ".php": "php", ".m": "objective-c", ".mm": "objective-cpp", ".zig": "zig", ".groovy": "groovy",
    ".gradle": "groovy", ".proto": "proto", ".sol": "solidity", ".vue": "vue", ".svelte": "svelte", ".cu": "cuda-cpp",
    ".fs": "fsharp", ".lua": "lua", ".sql": "sql", ".hs": "haskell", ".elm": "elm", ".adb": "ada", ".ads": "ada",
}
# languages whose blocks open with a brace at a line's end; the others (and Python) with a colon
BRACES = frozenset(lang for lang, comment in COMMENTS.items() if comment == SLASHES) - {"jsonc"}
COLON: tuple[str, ...] = (":",)
BRACE: tuple[str, ...] = ("{",)


def language_of(language_id: str, path: str = "") -> str:
    """The language a document is in: its languageId when the daemon knows it, else its extension's, else ""."""
    language = language_id.strip().lower() if isinstance(language_id, str) else ""
    if language in COMMENTS:
        return language
    return EXTENSIONS.get(posixpath.splitext(path)[1].lower(), "")


def comment_of(language_id: str, path: str = "") -> str:
    """The line-comment leader that heads a context chunk from this document (`# path`, `// path`, `-- path`)."""
    return COMMENTS.get(language_of(language_id, path), HASH)


def block_openers(language_id: str, path: str = "") -> tuple[str, ...]:
    """The endings of a line after which a new block's body, a multi-line suggestion, may start."""
    return BRACE if language_of(language_id, path) in BRACES else COLON


# Languages whose files may feed each other's context and copies (#40: a TypeScript file got `al_sum` from
# `total_sum` in an open Python file). A language not named here is a family of its own; the context store applies
# the rule (chunk_store.py, ContextStore._kin: the same family, or an unknown one, which goes with any).
FAMILIES: dict[str, str] = {
    **dict.fromkeys(("javascript", "javascriptreact", "typescript", "typescriptreact", "vue", "svelte"), "js"),
    **dict.fromkeys(("c", "cpp", "objective-c", "objective-cpp", "cuda-cpp"), "c"),
    **dict.fromkeys(("shellscript", "sh", "bash", "zsh"), "shell"),
    **dict.fromkeys(("java", "kotlin", "groovy", "scala"), "jvm"),
}


def family_of(language_id: str, path: str = "") -> str:
    """The family of a document's language (python; js for JavaScript and TypeScript; c for C and C++; ...), by its
    languageId, else its extension; "" when neither says: such a document may read any other and be read by any."""
    language = language_id.strip().lower() if isinstance(language_id, str) else ""
    language = language or EXTENSIONS.get(posixpath.splitext(path)[1].lower(), "")
    return FAMILIES.get(language, language)

