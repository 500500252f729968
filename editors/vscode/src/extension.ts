// The VS Code side of tabd: starts `tabd serve` over stdio as a language client for
// documents of every language and shows the daemon's live figures in the status bar.
// The user's switches are toggles.ts (rules: controls.ts); next-edit suggestions are
// inlineEdits.ts (rules: edits.ts); pure helpers are logic.ts. Inline completion itself is
// vscode-languageclient 10's built-in feature: VS Code shows the ghost text, Tab
// (and Ctrl+Right, word by word, by VS Code's own word rule: this extension performs no
// partial accept of its own) accepts it, and the `tabd.accept` command each item
// carries goes back to the daemon through workspace/executeCommand, registered by
// the client from the server's executeCommandProvider. This file must therefore not
// register `tabd.accept` or `tabd.dismiss` itself: the second registration would fail.
// Nor may it rebuild the items: an item's range runs from the cursor through the
// editor's closers the suggestion writes itself (`foo(|)` + `x)`), and the client hands
// it to VS Code as it is. Without it VS Code's default range (to the line's end) gives
// the same line at a line's end, but nothing inside `print(len(|))`
// (tests/editors/test_vscode.py, the pair scenario). The middleware below does send the
// request itself (as the client would, through the client's own converters) for two
// reasons: a switched-off document must send nothing at all, and an empty answer's
// `tabd.reason`, which the converted list drops, is what the status bar shows.

import * as vscode from "vscode";
import { ChildProcess, spawn } from "node:child_process";
import {
  CloseAction,
  ErrorAction,
  ErrorHandler,
  InlineCompletionRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import * as readline from "node:readline";
import { controlStatus, emptyReason, excludedRule, readExclude } from "./controls";
import {
  LineTail,
  Settings,
  TabTally,
  cycleNote,
  exitMessage,
  initializationOptions,
  newTabTally,
  notFoundMessage,
  parseStats,
  readSettings,
  recordTab,
  resolveExecutable,
  serveArgs,
  statusText,
  statusTooltip,
  Stats,
} from "./logic";
import { SetEnabledParams, SET_ENABLED, Toggles } from "./toggles";
import { InlineEdits } from "./inlineEdits";

const STATS_REQUEST = "tabd/stats";

let client: LanguageClient | undefined;
let statusItem: vscode.StatusBarItem;
let output: vscode.LogOutputChannel;
let pollTimer: ReturnType<typeof setInterval> | undefined;
let polling = false;
let stateSubscription: vscode.Disposable | undefined;
let toggles: Toggles;
let inlineEdits: InlineEdits;
let lastStats: Stats | undefined;
/** the last answer: in which document, its reason when it was empty (and an excluded one's rule), and where it
 * was asked, with how many items it brought and which of them is on screen (Alt+] / Alt+[) */
let lastAnswer: { uri: string; reason?: string; rule?: string; version: number; line: number; character: number;
  count: number; index: number } | undefined;
/** Tabs pressed on tabd's suggestions, and how the answer after each came (the status bar's figures) */
let tally: TabTally = newTabTally();
/** a Tab whose following answer is still to be read: in which document */
let tabPending: string | undefined;
/** a Tab after which a next edit is asked for if no ghost text follows it: in which document */
let editAfterTab: string | undefined;
/** a word for the status item for a few seconds (Alt+]: "suggestion 2 of 3") */
let note: { text: string; until: number } | undefined;
/** what the daemon wrote last on stderr: the error when it exits before it answers */
const stderrTail = new LineTail();
/** messages already shown this session: each problem is said once */
const said = new Set<string>();

const TRUST_MESSAGE =
  "tabd is off in Restricted Mode: this folder is not trusted, and tabd would run `tabd serve` on its files " +
  "(and send them to the model engine you set). Trust the folder to turn tabd on.";

function currentSettings(): Settings {
  const cfg = vscode.workspace.getConfiguration("tabd");
  return readSettings({
    path: cfg.get("path"),
    args: cfg.get("args"),
    model: cfg.get("model"),
    depth: cfg.get("depth"),
    log: cfg.get("log"),
    statsInterval: cfg.get("statsInterval"),
  });
}

function workspaceFolder(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

function stopPolling(): void {
  if (pollTimer !== undefined) {
    clearInterval(pollTimer);
    pollTimer = undefined;
  }
}

async function pollStats(): Promise<void> {
  const c = client;
  if (polling || c === undefined || c.state !== State.Running) {
    return;
  }
  polling = true;
  try {
    lastStats = parseStats(await c.sendRequest(STATS_REQUEST, {}));
    renderStatus();
  } catch (err) {
    statusItem.tooltip = `tabd: ${STATS_REQUEST} failed: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    polling = false;
  }
}

/** An error or warning with its buttons, shown once per session for `key` (a restart does not say it again). */
function sayOnce(key: string, kind: "error" | "warning", message: string, buttons: Record<string, () => unknown>): void {
  output.info(message);
  if (said.has(key)) {
    return;
  }
  said.add(key);
  const show = kind === "error" ? vscode.window.showErrorMessage : vscode.window.showWarningMessage;
  void show(message, ...Object.keys(buttons)).then((choice) => {
    if (choice !== undefined) {
      void buttons[choice]();
    }
  });
}

const openSetting = (name: string) => () => vscode.commands.executeCommand("workbench.action.openSettings", name);

/** The last answer in the active document, when it was asked where the cursor is now (the one on screen). */
function answerHere(): typeof lastAnswer {
  const editor = vscode.window.activeTextEditor;
  const a = lastAnswer;
  if (editor === undefined || a === undefined || a.uri !== editor.document.uri.toString()) {
    return undefined;
  }
  const at = editor.selection.active;
  return a.version === editor.document.version && a.line === at.line && a.character === at.character ? a : undefined;
}

/** The status item: a switch that is off, or why the last answer in this editor was empty, over the figures. */
function renderStatus(): void {
  const c = client;
  if (c === undefined || c.state !== State.Running) {
    return;
  }
  const document = vscode.window.activeTextEditor?.document;
  const here = lastAnswer !== undefined && lastAnswer.uri === document?.uri.toString() ? lastAnswer : undefined;
  const control = controlStatus(toggles.state(document, here?.reason, here?.rule), Date.now());
  const noted = note !== undefined && note.until > Date.now() ? `$(sparkle) tabd: ${note.text}` : undefined;
  statusItem.text = noted ?? control.text ?? statusText(lastStats, tally);
  statusItem.tooltip = new vscode.MarkdownString(statusTooltip(lastStats, control.line, tally));
}

/** Alt+] / Alt+[: VS Code's next / previous inline suggestion, and which one is on screen in the status item
 * ("suggestion 2 of 3"), or "no other suggestion". */
async function cycle(delta: 1 | -1): Promise<void> {
  const before = answerHere();
  if (before !== undefined && before.count >= 2) {
    await vscode.commands.executeCommand(delta > 0 ? "editor.action.inlineSuggest.showNext" : "editor.action.inlineSuggest.showPrevious");
  }
  // VS Code asks again (explicitly) before it moves: the answer it moves in may be that newer one.
  const a = answerHere();
  if (a !== undefined && a.count >= 2) {
    a.index = (((a.index + delta) % a.count) + a.count) % a.count;
  }
  showNote(cycleNote(a?.index ?? 0, a?.count ?? 0));
}

function showNote(text: string): void {
  note = { text, until: Date.now() + 4000 };
  output.info(`status: ${text}`);
  renderStatus();
  setTimeout(() => renderStatus(), 4100);
}

/** After a Tab: the daemon's `last` says how the answer that followed came (its memory or not). */
async function readTab(): Promise<void> {
  const c = client;
  if (c === undefined || c.state !== State.Running) {
    return;
  }
  try {
    const stats = parseStats(await c.sendRequest(STATS_REQUEST, {}));
    recordTab(tally, stats?.last ?? undefined);
    lastStats = stats ?? lastStats;
    renderStatus();
  } catch (err) {
    output.info(`${STATS_REQUEST} after a Tab failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** The switch, to a daemon that says it takes it (initialize result: experimental.tabd.setEnabled). An older
 * one still gets no request from a switched-off document: the provider asks nothing. */
function sendSetEnabled(params: SetEnabledParams): void {
  const c = client;
  if (c === undefined || c.state !== State.Running) {
    return;
  }
  const tabd = (c.initializeResult?.capabilities.experimental as { tabd?: { setEnabled?: unknown } } | undefined)?.tabd;
  if (tabd?.setEnabled !== true) {
    return;
  }
  output.info(`${SET_ENABLED} ${JSON.stringify(params)}`);
  c.sendNotification(SET_ENABLED, params).catch(() => undefined);
}

/** ms from the last edit to asking for the next edit; -1 when next-edit suggestions are off. */
function nextEditDelay(): number {
  const cfg = vscode.workspace.getConfiguration("tabd.nextEdit");
  if (cfg.get("enabled") === false) {
    return -1;
  }
  const delay = cfg.get("delay");
  return typeof delay === "number" && Number.isFinite(delay) && delay >= 0 ? delay : 1100;
}

function readGlobSetting(name: "exclude" | "include"): string[] {
  const read = readExclude(vscode.workspace.getConfiguration("tabd").get(name));
  if (read.problem) {
    void vscode.window.showWarningMessage(read.problem.replace("tabd.exclude", `tabd.${name}`));
  }
  return read.value;
}

function startPolling(intervalMs: number): void {
  stopPolling();
  if (intervalMs > 0) {
    pollTimer = setInterval(() => void pollStats(), intervalMs);
  }
}

/** Restricted Mode: no daemon (it would read the folder's files); said once, with the way to trust the folder. */
function restricted(): void {
  statusItem.text = "$(shield) tabd: off in Restricted Mode";
  statusItem.tooltip = TRUST_MESSAGE;
  statusItem.show();
  sayOnce("trust", "warning", TRUST_MESSAGE, {
    "Manage Workspace Trust": () => vscode.commands.executeCommand("workbench.trust.manage"),
  });
}

async function startClient(): Promise<void> {
  if (!vscode.workspace.isTrusted) {
    restricted();
    return;
  }
  const settings = currentSettings();
  const folder = workspaceFolder();
  const command = resolveExecutable(settings.path, process.env, folder);
  if (command === undefined) {
    const message = notFoundMessage(settings.path);
    statusItem.text = "$(error) tabd: not found";
    statusItem.tooltip = message;
    statusItem.show();
    sayOnce(`not-found ${settings.path}`, "error", message, { "Open Settings": openSetting("tabd.path") });
    return;
  }

  // Spawned here, not by the client from {command, args}: the client forgets the process when it exits, and how it
  // exited (code, signal) is what a daemon that dies at start must be reported with. Each restart spawns anew.
  const serverOptions: ServerOptions = async () => {
    const child = spawn(command, serveArgs(settings), { cwd: folder, env: process.env, stdio: "pipe" });
    child.on("error", (err) => output.info(`tabd: ${command}: ${err.message}`));
    daemons.add(child);
    child.once("exit", () => daemons.delete(child));
    lastDaemon = child;
    return child;
  };
  const init = initializationOptions(settings, folder, readGlobSetting("exclude"), readGlobSetting("include"));
  stderrTail.clear();
  const lines = (input: NodeJS.ReadableStream, each: (line: string) => void) =>
    readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on("line", each);
  // Whether this client's daemon ever answered initialize: a daemon that exits before it did is a broken set-up,
  // said once with its error and the fix, not restarted; one that exits later is the client's default (restarts,
  // and after 5 crashes in 3 minutes its own message).
  let answered = false;
  let fallback: ErrorHandler | undefined;
  const defaults = () => (fallback ??= c.createDefaultErrorHandler());
  const clientOptions: LanguageClientOptions = {
    errorHandler: {
      // writes to a daemon that is gone (EPIPE) before it answered: the exit is what to say, once (closed)
      error: (error, message, count) =>
        answered ? defaults().error(error, message, count) : { action: ErrorAction.Shutdown, handled: true },
      closed: () => {
        if (!answered) {
          void reportExit(c, command, lastDaemon);
          return { action: CloseAction.DoNotRestart, handled: true };
        }
        return defaults().closed();
      },
    },
    // The client's own words for a daemon that exits at start ("initialization failed", "write EPIPE") would bury
    // the one message that says why and what to do (reportExit): not shown; the output has them.
    initializationFailedHandler: () => false,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    // As the client does by default, and the last lines of stderr kept: the error when the daemon exits at start.
    stdioOptions: {
      stdout: (input, channel) => lines(input, (line) => channel.info(line)),
      stderr: (input, channel) => lines(input, (line) => {
        stderrTail.push(line);
        channel.error(line);
      }),
    },
    // Every language: tabd.enable decides per language (the middleware), and the daemon's
    // content exclusion per file. Not other schemes: an output channel (this extension's own
    // log among them) would be a document that changes with every line written.
    documentSelector: [{ scheme: "file" }, { scheme: "untitled" }, { scheme: "vscode-notebook-cell" }],
    initializationOptions: init,
    outputChannel: output,
    middleware: {
      // The daemon also answers textDocument/completion, for editors without inline
      // completion. Here it would put the same suggestion in the suggest widget (which
      // then takes Tab) and cost a second model call per keystroke: never ask.
      provideCompletionItem: () => undefined,
      provideInlineCompletionItems: (document, position, context, token) =>
        provideInline(document, position, context, token),
      didOpen: async (document, next) => {
        await next(document);
        toggles.opened(document);
      },
      didClose: async (document, next) => {
        toggles.closed(document);
        await next(document);
      },
      // A completion accepted with Tab (its tabd.accept): the next edit may follow from it, when no ghost text
      // does (one suggestion at a time: an edit drawn would keep the next ghost text away); asked anyway when no
      // answer comes (inline suggestions off).
      executeCommand: async (command, args, next) => {
        const uri = vscode.window.activeTextEditor?.document.uri.toString();
        if (command === "tabd.accept") {
          // VS Code runs the item's command on a whole accept (Tab), never for text typed through it.
          tabPending = uri;
          editAfterTab = uri;
        }
        const result = await next(command, args);
        if (command === "tabd.accept") {
          setTimeout(() => {
            if (editAfterTab !== undefined && editAfterTab === uri) {
              editAfterTab = undefined;
              inlineEdits.afterAccept();
            }
          }, 400);
        }
        return result;
      },
    },
  };
  output.info(`starting ${command} ${serveArgs(settings).join(" ")} with ${JSON.stringify(init)}`);
  statusItem.text = "$(sync~spin) tabd: starting";
  statusItem.tooltip = "tabd: starting";
  statusItem.show();

  const c = new LanguageClient("tabd", "tabd", serverOptions, clientOptions);
  client = c;
  stateSubscription = c.onDidChangeState((e) => {
    if (e.newState === State.Running) {
      answered = true;
    }
    if (e.newState === State.Stopped && client === c && !exited.has(c)) {
      statusItem.text = "$(debug-disconnect) tabd: stopped";
      statusItem.tooltip = "tabd: the daemon stopped; run 'tabd: Restart the daemon'";
    }
  });
  try {
    await c.start();
  } catch (err) {
    output.info(`tabd: the daemon failed to start: ${err instanceof Error ? err.message : String(err)}`);
    await reportExit(c, command, lastDaemon);
    return;
  }
  statusItem.text = statusText(undefined);
  statusItem.tooltip = statusTooltip(undefined);
  lastStats = undefined;
  toggles.resend();
  renderStatus();
  startPolling(settings.statsInterval);
  void pollStats();
}

/**
 * The inline completion provider behind the client's: nothing, and no request, while the
 * document is switched off; else the client's own request and conversion, with the empty
 * answer's reason kept for the status bar.
 */
async function provideInline(
  document: vscode.TextDocument,
  position: vscode.Position,
  context: vscode.InlineCompletionContext,
  token: vscode.CancellationToken,
): Promise<vscode.InlineCompletionItem[] | vscode.InlineCompletionList | undefined | null> {
  const c = client;
  if (c === undefined || !toggles.active(document)) {
    return undefined;
  }
  if (inlineEdits.holdsTab(document, position)) {
    return undefined; // one suggestion at a time: the next edit drawn here keeps Tab
  }
  const params = c.code2ProtocolConverter.asInlineCompletionParams(document, position, context);
  let raw: unknown;
  try {
    raw = await c.sendRequest(InlineCompletionRequest.type, params, token);
  } catch (error) {
    return c.handleFailedRequest(InlineCompletionRequest.type, token, error, null);
  }
  if (token.isCancellationRequested) {
    return undefined;
  }
  if (inlineEdits.holdsTab(document, position)) {
    return undefined; // a next edit was drawn here while this was computed: it keeps Tab
  }
  const uri = document.uri.toString();
  const items = Array.isArray(raw) ? raw : (raw as { items?: unknown } | null)?.items;
  const count = Array.isArray(items) ? items.length : 0;
  const same = lastAnswer !== undefined && lastAnswer.uri === uri && lastAnswer.version === document.version &&
    lastAnswer.line === position.line && lastAnswer.character === position.character;
  lastAnswer = {
    uri, reason: emptyReason(raw), rule: excludedRule(raw), version: document.version, line: position.line,
    character: position.character, count,
    // VS Code asks again at the same place before it cycles: the item on screen stays the one counted
    index: same && context.triggerKind === vscode.InlineCompletionTriggerKind.Invoke ? Math.min(lastAnswer!.index, Math.max(count - 1, 0)) : 0,
  };
  if (tabPending === uri) {
    tabPending = undefined;
    void readTab();
  }
  if (editAfterTab === uri) {
    editAfterTab = undefined;
    if (count === 0) {
      inlineEdits.afterAccept();
    }
  }
  if (count > 0) {
    inlineEdits.ghostShown(document); // the cursor left the edit: this ghost text wins, one at a time
  }
  renderStatus();
  return c.protocol2CodeConverter.asInlineCompletionResult(raw as Parameters<typeof c.protocol2CodeConverter.asInlineCompletionResult>[0], token);
}

/** Clients whose daemon exited before it answered (reportExit said so). */
const exited = new WeakSet<LanguageClient>();

/** The daemon exited before it answered initialize: how, what it wrote last, and the fix; once per session. */
async function reportExit(c: LanguageClient, command: string, proc: ChildProcess | undefined): Promise<void> {
  if (exited.has(c)) {
    return;
  }
  exited.add(c);
  // the exit status and the last stderr lines come after the connection closed
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 1000);
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) {
      clearTimeout(timer);
      setTimeout(resolve, 100);
      return;
    }
    proc.once("exit", () => {
      clearTimeout(timer);
      setTimeout(resolve, 100);
    });
  });
  const exit = { code: proc?.exitCode ?? null, signal: proc?.signalCode ?? null };
  const message = exitMessage(command, exit.code, exit.signal, stderrTail.get());
  if (client === c) {
    statusItem.text = "$(error) tabd: exited";
    statusItem.tooltip = message;
    statusItem.show();
  }
  sayOnce("exit", "error", message, {
    "Show Log": () => output.show(true),
    "Open Settings": openSetting("tabd.path"),
  });
}

/** Daemons this window started that have not exited; the last one started. */
const daemons = new Set<ChildProcess>();
let lastDaemon: ChildProcess | undefined;

/** A daemon that outlived the client's stop (its shutdown and exit unanswered) is killed: the client would kill one it
 * spawned itself. */
function killLeftovers(): void {
  for (const child of daemons) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill();
    }
  }
}

/**
 * `tabd: Check the daemon's copy of this document`: asks tabd/document and compares it with the editor's text,
 * the first line that differs named. What to run when a suggestion looks shifted.
 */
async function checkSync(): Promise<void> {
  const c = client;
  const document = vscode.window.activeTextEditor?.document;
  if (c === undefined || c.state !== State.Running || document === undefined) {
    void vscode.window.showWarningMessage("tabd: no daemon running or no file open");
    return;
  }
  const uri = document.uri.toString();
  try {
    const answer = (await c.sendRequest("tabd/document", { uri })) as { text?: unknown; version?: unknown };
    const name = vscode.workspace.asRelativePath(document.uri);
    const theirs = typeof answer.text === "string" ? answer.text : "";
    const ours = document.getText();
    if (theirs === ours) {
      void vscode.window.showInformationMessage(`tabd: the daemon's copy of ${name} is in sync (version ${String(answer.version)})`);
      return;
    }
    const a = ours.split(/\r?\n/);
    const b = theirs.split(/\r?\n/);
    let line = 0;
    while (line < a.length && line < b.length && a[line] === b[line]) {
      line++;
    }
    void vscode.window.showWarningMessage(
      `tabd: the daemon's copy of ${name} is OUT OF SYNC from line ${line + 1}; run 'tabd: Restart the daemon'`,
    );
  } catch (err) {
    void vscode.window.showWarningMessage(`tabd: tabd/document failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function stopClient(): Promise<void> {
  stopPolling();
  stateSubscription?.dispose();
  stateSubscription = undefined;
  const c = client;
  client = undefined;
  if (c !== undefined) {
    try {
      await c.stop(2000);
    } catch (err) {
      output.info(`stopping tabd: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  killLeftovers();
}

async function restart(): Promise<void> {
  await stopClient();
  await startClient();
}

// The user moved to another editor: the server prefills the prompt at its cursor in the background
// (tabd/focus), so the first suggestion there reuses the model's kept KV instead of a full prefill.
function sendFocus(editor: vscode.TextEditor | undefined): void {
  const c = client;
  if (editor === undefined || c === undefined || c.state !== State.Running || !toggles.active(editor.document)) {
    return; // a switched-off document costs the daemon nothing, not even a prefill
  }
  const at = editor.selection.active;
  c.sendNotification("tabd/focus", {
    uri: editor.document.uri.toString(),
    position: { line: at.line, character: at.character },
  }).catch(() => undefined);
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("tabd", { log: true });
  statusItem = vscode.window.createStatusBarItem("tabd.status", vscode.StatusBarAlignment.Right, 100);
  statusItem.name = "tabd";
  statusItem.command = "tabd.menu";
  toggles = new Toggles(context.globalState, sendSetEnabled);
  inlineEdits = new InlineEdits(() => client, (d) => toggles.active(d), nextEditDelay, (m) => output.info(m));
  context.subscriptions.push(
    output,
    statusItem,
    toggles,
    inlineEdits,
    vscode.commands.registerCommand("tabd.inlineEdit.tab", () => inlineEdits.tab()),
    vscode.commands.registerCommand("tabd.inlineEdit.dismiss", () => inlineEdits.dismiss()),
    vscode.commands.registerCommand("tabd.inlineEdit.request", () => {
      const editor = vscode.window.activeTextEditor;
      return editor ? inlineEdits.request(editor) : undefined;
    }),
    toggles.onDidChange(() => {
      renderStatus();
      inlineEdits.switched();
    }),
    vscode.commands.registerCommand("tabd.restart", () => restart()),
    vscode.commands.registerCommand("tabd.showOutput", () => output.show(true)),
    vscode.commands.registerCommand("tabd.toggle", () => toggles.toggle()),
    vscode.commands.registerCommand("tabd.snooze", (minutes?: unknown) => toggles.snooze(minutes)),
    vscode.commands.registerCommand("tabd.toggleLanguage", (language?: unknown) => toggles.toggleLanguage(language)),
    vscode.commands.registerCommand("tabd.menu", () => {
      const here = lastAnswer !== undefined && lastAnswer.uri === vscode.window.activeTextEditor?.document.uri.toString()
        ? lastAnswer : undefined;
      return toggles.menu(here?.reason === "excluded" ? { rule: here.rule } : undefined);
    }),
    vscode.commands.registerCommand("tabd.showNext", () => cycle(1)),
    vscode.commands.registerCommand("tabd.showPrevious", () => cycle(-1)),
    vscode.workspace.onDidGrantWorkspaceTrust(() => void startClient()),
    vscode.commands.registerCommand("tabd.checkSync", () => checkSync()),
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      sendFocus(editor);
      renderStatus();
    }),
    // The snooze's minutes count down in the status bar even with polling off.
    (() => {
      const timer = setInterval(() => renderStatus(), 30000);
      return { dispose: () => clearInterval(timer) };
    })(),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("tabd.statsInterval") && client !== undefined) {
        startPolling(currentSettings().statsInterval);
      }
      if (e.affectsConfiguration("tabd.enable")) {
        toggles.configurationChanged();
      }
      const restartKeys = ["tabd.path", "tabd.args", "tabd.model", "tabd.depth", "tabd.log", "tabd.exclude", "tabd.include"];
      if (restartKeys.some((k) => e.affectsConfiguration(k))) {
        void restart();
      }
    }),
    { dispose: () => void stopClient() },
  );
  await startClient();
}

export function deactivate(): Thenable<void> | undefined {
  stopPolling();
  const c = client;
  client = undefined;
  return (c?.stop(2000) ?? Promise.resolve()).then(killLeftovers, killLeftovers);
}
