// The pure side of next-edit suggestions (#26): the `textDocument/copilotInlineEdit` answer
// read into a typed edit, whether it is far enough from the cursor to need a jump, and
// the labels drawn for it. No `vscode` import, so `node --test` loads it as is.

export interface Pos {
  line: number;
  character: number;
}

export interface InlineEdit {
  text: string;
  range: { start: Pos; end: Pos };
  uri: string;
  version: number;
  command: { title: string; command: string; arguments: unknown[] };
  /** the server's id for the edit (the command's first argument), for accept / reject */
  id: unknown;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function readPos(value: unknown): Pos | undefined {
  if (!isObject(value)) {
    return undefined;
  }
  const { line, character } = value;
  return Number.isInteger(line) && Number.isInteger(character) && (line as number) >= 0 && (character as number) >= 0
    ? { line: line as number, character: character as number }
    : undefined;
}

/**
 * The first edit of a copilotInlineEdit result, or undefined for none or a malformed one (the answer is
 * then treated as "no edit": nothing is drawn, nothing applied).
 */
export function readInlineEdit(result: unknown): InlineEdit | undefined {
  const edits = isObject(result) ? result.edits : undefined;
  const edit = Array.isArray(edits) ? edits[0] : undefined;
  if (!isObject(edit) || typeof edit.text !== "string" || !isObject(edit.range)) {
    return undefined;
  }
  const start = readPos(edit.range.start);
  const end = readPos(edit.range.end);
  const doc = edit.textDocument;
  const command = edit.command;
  if (start === undefined || end === undefined || !isObject(doc) || typeof doc.uri !== "string") {
    return undefined;
  }
  if (end.line < start.line || (end.line === start.line && end.character < start.character)) {
    return undefined;
  }
  if (!isObject(command) || typeof command.command !== "string") {
    return undefined;
  }
  const args = Array.isArray(command.arguments) ? command.arguments : [];
  return {
    text: edit.text,
    range: { start, end },
    uri: doc.uri,
    version: typeof doc.version === "number" ? doc.version : 0,
    command: { title: typeof command.title === "string" ? command.title : "", command: command.command, arguments: args },
    id: args[0],
  };
}

/** The contract's jump rule: the edit starts more than one line from the cursor's line. */
export function needsJump(edit: InlineEdit, cursorLine: number): boolean {
  return Math.abs(edit.range.start.line - cursorLine) > 1;
}

/** The marker at the cursor's line when the edit is far (lines shown 1-based, as the editor numbers them). */
export function jumpLabel(edit: InlineEdit): string {
  return `  ⇥ Tab: jump to line ${edit.range.start.line + 1}`;
}

/** The new text as one line of decoration: newlines and tabs shown, long text cut. */
export function insertLabel(text: string, max = 120): string {
  const one = text.replace(/\r?\n/g, "⏎").replace(/\t/g, "→");
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

/** Where the cursor goes after the edit is applied: the end of the new text. */
export function endOfInserted(edit: InlineEdit): Pos {
  const lines = edit.text.split(/\r?\n/);
  const last = lines[lines.length - 1];
  return lines.length === 1
    ? { line: edit.range.start.line, character: edit.range.start.character + last.length }
    : { line: edit.range.start.line + lines.length - 1, character: last.length };
}
