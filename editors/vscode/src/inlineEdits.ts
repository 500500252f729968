// Next-edit suggestions in VS Code (#26): asks the daemon's `textDocument/copilotInlineEdit`
// once edits settle (and right after a Tab), draws the edit with plain decorations (the
// proposed inline-edit API is closed to extensions installed from a file), and lets Tab
// jump to it and apply it. Shape of the conversation (the wire contract):
//   shown   -> textDocument/didShowInlineEdit {item: {command}}
//   Tab     -> (far: the cursor jumps to the edit first) the editor replaces the range with
//              the text, cursor at its end, THEN workspace/executeCommand(edit.command)
//   Esc     -> workspace/executeCommand tabd.rejectInlineEdit [id]
//   focus   -> textDocument/didFocus {textDocument: {uri}}
// The context key tabd.inlineEditVisible gates the Tab and Esc keybindings (package.json),
// and gives way to the suggest widget, which keeps Tab.
//
// One suggestion at a time under Tab (#44): an edit, once drawn, wins. Ghost text on screen is hidden
// when it appears, and none is asked for while the cursor stays where the edit appeared (or where
// Tab jumped to it): holdsTab(). Typing dismisses the edit and ghost text comes back; so does moving
// the cursor elsewhere, where a ghost text that arrives hides the edit (ghostShown()).

import * as vscode from "vscode";
import { ExecuteCommandRequest, LanguageClient, State } from "vscode-languageclient/node";
import { InlineEdit, endOfInserted, insertLabel, jumpLabel, needsJump, readInlineEdit } from "./edits";

export const INLINE_EDIT = "textDocument/copilotInlineEdit";
export const DID_SHOW = "textDocument/didShowInlineEdit";
export const DID_FOCUS = "textDocument/didFocus";
export const REJECT = "tabd.rejectInlineEdit";
export const CONTEXT_KEY = "tabd.inlineEditVisible";

interface Shown {
  edit: InlineEdit;
  document: vscode.TextDocument;
  range: vscode.Range;
  /** where the cursor was when it was drawn (or Tab jumped to it): while it stays there, the edit keeps Tab */
  anchor?: vscode.Position;
}

export class InlineEdits implements vscode.Disposable {
  private readonly removed = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
    textDecoration: "line-through",
    border: "1px solid",
    borderColor: new vscode.ThemeColor("diffEditor.removedTextBorder"),
  });
  private readonly inserted = vscode.window.createTextEditorDecorationType({
    after: {
      backgroundColor: new vscode.ThemeColor("diffEditor.insertedTextBackground"),
      color: new vscode.ThemeColor("editor.foreground"),
      border: "1px solid",
      borderColor: new vscode.ThemeColor("diffEditor.insertedTextBorder"),
      margin: "0 0 0 2px",
    },
  });
  private readonly marker = vscode.window.createTextEditorDecorationType({
    after: {
      color: new vscode.ThemeColor("editorGhostText.foreground"),
      fontStyle: "italic",
      margin: "0 0 0 1em",
    },
  });
  private shown: Shown | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** bumped by every request and every change: an answer that comes back to an older generation is dropped */
  private generation = 0;
  /** the editor is applying our edit: its change is ours, not the user's */
  private applying = false;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly client: () => LanguageClient | undefined,
    private readonly active: (document: vscode.TextDocument) => boolean,
    private readonly delayMs: () => number,
    private readonly log: (message: string) => void,
  ) {
    this.subscriptions.push(
      vscode.workspace.onDidChangeTextDocument((e) => this.changed(e)),
      vscode.window.onDidChangeTextEditorSelection((e) => this.moved(e)),
      vscode.window.onDidChangeActiveTextEditor((editor) => this.focused(editor)),
      vscode.window.onDidChangeVisibleTextEditors(() => this.redraw()),
    );
  }

  dispose(): void {
    this.cancel();
    this.hide();
    this.subscriptions.forEach((d) => d.dispose());
    this.removed.dispose();
    this.inserted.dispose();
    this.marker.dispose();
  }

  /** Whether the running daemon serves inline edits (initialize result, capabilities.experimental). */
  private serving(): LanguageClient | undefined {
    const c = this.client();
    if (c === undefined || c.state !== State.Running) {
      return undefined;
    }
    const experimental = c.initializeResult?.capabilities.experimental as Record<string, unknown> | undefined;
    return experimental?.copilotInlineEdit === true ? c : undefined;
  }

  // -- when to ask -----------------------------------------------------------------------------

  private changed(e: vscode.TextDocumentChangeEvent): void {
    if (this.applying || e.contentChanges.length === 0) {
      return;
    }
    if (this.shown !== undefined && this.shown.document === e.document) {
      this.hide(); // editing while an edit shows: the daemon counts it an implicit reject
    }
    const editor = vscode.window.activeTextEditor;
    if (editor?.document === e.document) {
      this.schedule(editor, this.delayMs());
    }
  }

  private moved(e: vscode.TextEditorSelectionChangeEvent): void {
    if (this.shown !== undefined && e.textEditor.document === this.shown.document) {
      this.draw(e.textEditor); // the jump marker follows the cursor
      return;
    }
    // The user moved on (arrows, a click) after an edit: a pause as good as waiting, so ask from there.
    const byUser = e.kind === vscode.TextEditorSelectionChangeKind.Keyboard || e.kind === vscode.TextEditorSelectionChangeKind.Mouse;
    if (byUser && e.textEditor === vscode.window.activeTextEditor && this.timer === undefined) {
      this.schedule(e.textEditor, this.delayMs());
    }
  }

  private focused(editor: vscode.TextEditor | undefined): void {
    this.cancel();
    this.hide();
    const c = this.serving();
    if (editor === undefined || c === undefined || !this.active(editor.document)) {
      return;
    }
    c.sendNotification(DID_FOCUS, { textDocument: { uri: editor.document.uri.toString() } }).catch(() => undefined);
  }

  /** Switched off (toggle, snooze, its language): an edit drawn there goes. */
  switched(): void {
    if (this.shown !== undefined && !this.active(this.shown.document)) {
      this.cancel();
      this.hide();
    }
  }

  /** A completion was accepted with Tab: the edit that follows it, at once. */
  afterAccept(): void {
    const editor = vscode.window.activeTextEditor;
    if (editor !== undefined) {
      this.schedule(editor, 50);
    }
  }

  private schedule(editor: vscode.TextEditor, ms: number): void {
    this.cancel();
    if (ms < 0) {
      return; // turned off
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.request(editor);
    }, ms);
  }

  private cancel(): void {
    this.generation++;
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** Asks for the edit at the editor's cursor, and shows it when the document is still the one it is for. */
  async request(editor: vscode.TextEditor): Promise<void> {
    const c = this.serving();
    const document = editor.document;
    if (c === undefined || document.isClosed || !this.active(document) || editor !== vscode.window.activeTextEditor) {
      return;
    }
    const generation = ++this.generation;
    const at = editor.selection.active;
    const version = document.version;
    let result: unknown;
    try {
      result = await c.sendRequest(INLINE_EDIT, {
        textDocument: { uri: document.uri.toString(), version },
        position: { line: at.line, character: at.character },
      });
    } catch (err) {
      this.log(`${INLINE_EDIT} failed: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    if (generation !== this.generation || document.version !== version || editor !== vscode.window.activeTextEditor) {
      return; // the user moved on while it was computed
    }
    const edit = readInlineEdit(result);
    if (edit === undefined || (edit.version !== 0 && edit.version !== version) || edit.uri !== document.uri.toString()) {
      this.hide();
      return;
    }
    const range = new vscode.Range(edit.range.start.line, edit.range.start.character, edit.range.end.line, edit.range.end.character);
    if (document.validateRange(range).isEqual(range) === false) {
      this.hide();
      return;
    }
    await this.show({ edit, document, range, anchor: editor.selection.active });
  }

  /** Whether the edit on screen keeps Tab from ghost text at `position` in `document` (then none is asked for). */
  holdsTab(document: vscode.TextDocument, position: vscode.Position): boolean {
    const shown = this.shown;
    return shown !== undefined && shown.document === document && shown.anchor !== undefined && shown.anchor.isEqual(position);
  }

  /** Ghost text is about to show in `document` (the cursor moved away from the edit): the edit goes. */
  ghostShown(document: vscode.TextDocument): void {
    if (this.shown !== undefined && this.shown.document === document) {
      this.hide();
    }
  }

  // -- drawing -----------------------------------------------------------------------------------

  private async show(shown: Shown): Promise<void> {
    this.shown = shown; // from here no ghost text is asked for or shown at the anchor (holdsTab)
    // Ghost text already on screen would take Tab (its keybinding wins over ours): the edit takes its place, hidden
    // first so that the two are never on screen together.
    await vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
    if (this.shown !== shown) {
      return; // typed or moved on meanwhile
    }
    this.redraw();
    void vscode.commands.executeCommand("setContext", CONTEXT_KEY, true);
    // A ghost text answered just before the edit was drawn reaches the screen a moment later: hidden then too.
    for (const ms of [100, 300]) {
      setTimeout(() => {
        const editor = vscode.window.activeTextEditor;
        if (this.shown === shown && editor !== undefined && this.holdsTab(editor.document, editor.selection.active)) {
          void vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
        }
      }, ms);
    }
    this.serving()?.sendNotification(DID_SHOW, { item: { command: shown.edit.command } }).catch(() => undefined);
  }

  private redraw(): void {
    for (const editor of vscode.window.visibleTextEditors) {
      this.draw(editor);
    }
  }

  private draw(editor: vscode.TextEditor): void {
    const shown = this.shown;
    if (shown === undefined || editor.document !== shown.document) {
      editor.setDecorations(this.removed, []);
      editor.setDecorations(this.inserted, []);
      editor.setDecorations(this.marker, []);
      return;
    }
    const { edit, range } = shown;
    editor.setDecorations(this.removed, range.isEmpty ? [] : [range]);
    editor.setDecorations(this.inserted, [
      { range: new vscode.Range(range.end, range.end), renderOptions: { after: { contentText: insertLabel(edit.text) || "⌫" } } },
    ]);
    const line = editor.selection.active.line;
    const far = needsJump(edit, line);
    const end = editor.document.lineAt(line).range.end;
    editor.setDecorations(
      this.marker,
      far ? [{ range: new vscode.Range(end, end), renderOptions: { after: { contentText: jumpLabel(edit) } } }] : [],
    );
  }

  private hide(): void {
    if (this.shown === undefined) {
      return;
    }
    this.shown = undefined;
    this.redraw();
    void vscode.commands.executeCommand("setContext", CONTEXT_KEY, false);
  }

  // -- the keys ----------------------------------------------------------------------------------

  /** Tab: to the edit when it is far from the cursor, else apply it. */
  async tab(): Promise<void> {
    const shown = this.shown;
    const editor = vscode.window.activeTextEditor;
    if (shown === undefined || editor === undefined || editor.document !== shown.document) {
      return;
    }
    if (needsJump(shown.edit, editor.selection.active.line)) {
      shown.anchor = shown.range.start;
      editor.selection = new vscode.Selection(shown.range.start, shown.range.start);
      editor.revealRange(shown.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      return; // the selection change redraws without the marker
    }
    await this.apply(editor, shown);
  }

  private async apply(editor: vscode.TextEditor, shown: Shown): Promise<void> {
    const { edit, range, document } = shown;
    this.cancel();
    this.hide();
    this.applying = true;
    let done = false;
    try {
      done = await editor.edit((b) => b.replace(range, edit.text), { undoStopBefore: true, undoStopAfter: true });
    } finally {
      this.applying = false;
    }
    if (!done) {
      this.log("the inline edit could not be applied (the document changed)");
      return;
    }
    const end = endOfInserted(edit);
    const cursor = document.validatePosition(new vscode.Position(end.line, end.character));
    editor.selection = new vscode.Selection(cursor, cursor);
    const c = this.serving();
    if (c === undefined) {
      return;
    }
    try {
      // After the edit: the client's didChange goes out before this request, so the daemon sees the edit first.
      await c.sendRequest(ExecuteCommandRequest.type, { command: edit.command.command, arguments: edit.command.arguments });
    } catch (err) {
      this.log(`${edit.command.command} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    await this.request(editor); // the next edit in the chain, speculated by the daemon
  }

  /** Esc: dismissed; the daemon hears it. */
  dismiss(): void {
    const shown = this.shown;
    this.cancel();
    this.hide();
    const c = this.serving();
    if (shown !== undefined && c !== undefined) {
      c.sendRequest(ExecuteCommandRequest.type, { command: REJECT, arguments: [shown.edit.id] }).catch((err) =>
        this.log(`${REJECT} failed: ${err instanceof Error ? err.message : String(err)}`),
      );
    }
  }
}
