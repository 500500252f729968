// The user's switches (#27), the VS Code side: on/off for everything (`tabd.toggle`, kept
// across reloads), a snooze of N minutes (`tabd.snooze`), and the per-language
// `tabd.enable` map. The daemon hears each through `tabd/setEnabled` so a switched-off
// document costs it nothing; the provider asks `active()` before every request, so none
// is even sent. The pure rules (the map, the minutes, the words) are in controls.ts.

import * as vscode from "vscode";
import {
  ControlState,
  EnableMap,
  LanguageContribution,
  languageEnabled,
  languageNamedByExtension,
  parseSnoozeMinutes,
  readEnableMap,
  DEFAULT_SNOOZE_MINUTES,
} from "./controls";

export const SET_ENABLED = "tabd/setEnabled";
const ENABLED_KEY = "tabd.enabled";

export interface SetEnabledParams {
  enabled: boolean;
  uri?: string;
  minutes?: number;
}

export class Toggles implements vscode.Disposable {
  private enabled: boolean;
  private snoozedUntil: number | null = null;
  private snoozeTimer: ReturnType<typeof setTimeout> | undefined;
  private map: EnableMap;
  /** documents the daemon was told are off (their language is), so a map change can turn them back on */
  private offUris = new Set<string>();
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;

  constructor(
    private readonly memento: vscode.Memento,
    private readonly send: (params: SetEnabledParams) => void,
  ) {
    this.enabled = memento.get<boolean>(ENABLED_KEY, true) !== false;
    this.map = this.readMap();
  }

  dispose(): void {
    if (this.snoozeTimer !== undefined) {
      clearTimeout(this.snoozeTimer);
    }
    this.changed.dispose();
  }

  /** Whether suggestions may be asked for in this document now. */
  active(document: vscode.TextDocument): boolean {
    return this.globallyOn() && languageEnabled(this.map, document.languageId);
  }

  state(document: vscode.TextDocument | undefined, reason?: string, rule?: string): ControlState {
    return {
      enabled: this.enabled,
      snoozedUntil: this.snoozedUntil,
      language: document?.languageId,
      languageOn: document === undefined || languageEnabled(this.map, document.languageId),
      reason,
      rule,
    };
  }

  private globallyOn(): boolean {
    return this.enabled && this.snoozedUntil === null;
  }

  private readMap(): EnableMap {
    const read = readEnableMap(vscode.workspace.getConfiguration("tabd").get("enable"));
    if (read.problem) {
      void vscode.window.showWarningMessage(read.problem);
    }
    return read.value;
  }

  /** After (re)starting the daemon: tell it everything it must know. */
  resend(): void {
    if (this.snoozedUntil !== null) {
      this.send({ enabled: false, minutes: Math.max((this.snoozedUntil - Date.now()) / 60000, 1 / 60) });
    } else if (!this.enabled) {
      this.send({ enabled: false });
    }
    this.offUris.clear();
    for (const document of vscode.workspace.textDocuments) {
      this.opened(document);
    }
  }

  /** A document the daemon now has: off for the daemon too when its language is off. */
  opened(document: vscode.TextDocument): void {
    const uri = document.uri.toString();
    if (!languageEnabled(this.map, document.languageId) && !this.offUris.has(uri)) {
      this.offUris.add(uri);
      this.send({ enabled: false, uri });
    }
  }

  closed(document: vscode.TextDocument): void {
    this.offUris.delete(document.uri.toString());
  }

  /** `tabd.enable` changed: re-read it, and tell the daemon about documents whose language switched. */
  configurationChanged(): void {
    this.map = this.readMap();
    for (const document of vscode.workspace.textDocuments) {
      const uri = document.uri.toString();
      const on = languageEnabled(this.map, document.languageId);
      if (on && this.offUris.delete(uri)) {
        this.send({ enabled: true, uri });
      } else if (!on) {
        this.opened(document);
      }
    }
    this.changed.fire();
  }

  toggle(): void {
    this.setEnabled(!this.globallyOn());
  }

  setEnabled(on: boolean): void {
    this.clearSnooze();
    this.enabled = on;
    void this.memento.update(ENABLED_KEY, on);
    this.send({ enabled: on });
    if (on) {
      // A daemon may take "every document on" to cover documents whose language is off: tell it again.
      this.offUris.clear();
      vscode.workspace.textDocuments.forEach((d) => this.opened(d));
    }
    this.changed.fire();
  }

  /** `tabd.snooze [minutes]`: asks when no number is given; 0, a negative or a non-number is an error, ignored. */
  async snooze(minutes?: unknown): Promise<void> {
    let input = minutes;
    if (input === undefined) {
      input = await vscode.window.showInputBox({
        title: "tabd: snooze suggestions",
        prompt: "For how many minutes?",
        value: String(DEFAULT_SNOOZE_MINUTES),
      });
      if (input === undefined) {
        return; // Esc
      }
    }
    const read = parseSnoozeMinutes(input);
    if (read.value === undefined) {
      void vscode.window.showErrorMessage(read.problem ?? "tabd: not snoozed");
      return;
    }
    this.clearSnooze();
    this.snoozedUntil = Date.now() + read.value * 60000;
    this.armSnooze();
    this.send({ enabled: false, minutes: read.value });
    this.changed.fire();
  }

  // setTimeout holds at most 2^31-1 ms (24.8 days): a longer snooze re-arms until it is due.
  private armSnooze(): void {
    const left = (this.snoozedUntil ?? Date.now()) - Date.now();
    this.snoozeTimer = setTimeout(() => this.snoozeEnded(), Math.min(Math.max(left, 0), 2 ** 31 - 1));
  }

  private snoozeEnded(): void {
    this.snoozeTimer = undefined;
    if (this.snoozedUntil !== null && this.snoozedUntil > Date.now()) {
      this.armSnooze();
      return;
    }
    this.snoozedUntil = null;
    // The daemon re-enables by itself; saying so again costs nothing and covers a restart in between.
    this.send({ enabled: this.enabled });
    this.changed.fire();
  }

  private clearSnooze(): void {
    if (this.snoozeTimer !== undefined) {
      clearTimeout(this.snoozeTimer);
      this.snoozeTimer = undefined;
    }
    this.snoozedUntil = null;
  }

  /** Flips one language in the user's `tabd.enable` (the active editor's when none is given). */
  async toggleLanguage(languageId?: unknown): Promise<void> {
    const language = typeof languageId === "string" ? languageId : vscode.window.activeTextEditor?.document.languageId;
    if (language === undefined) {
      void vscode.window.showInformationMessage("tabd: open a file to switch its language on or off");
      return;
    }
    const updated = { ...this.map, [language]: !languageEnabled(this.map, language) };
    await vscode.workspace.getConfiguration("tabd").update("enable", updated, vscode.ConfigurationTarget.Global);
  }

  /** The status item's menu. `excluded`: the rule that keeps the active document out, when its answer said so. */
  async menu(excluded?: { rule?: string }): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const document = editor?.document;
    const language = document?.languageId;
    type Item = vscode.QuickPickItem & { run: () => unknown };
    const items: Item[] = [
      this.globallyOn()
        ? { label: "$(circle-slash) Disable suggestions", run: () => this.setEnabled(false) }
        : { label: "$(check) Enable suggestions", run: () => this.setEnabled(true) },
      { label: "$(clock) Snooze…", description: `${DEFAULT_SNOOZE_MINUTES} min by default`, run: () => this.snooze() },
    ];
    if (document !== undefined && language !== undefined) {
      const on = languageEnabled(this.map, language);
      if (!on || languageNamedByExtension(document.fileName, language, declaredLanguages())) {
        items.push({
          label: `${on ? "$(circle-slash) Disable" : "$(check) Enable"} for ${language}`,
          description: "tabd.enable",
          run: () => this.toggleLanguage(language),
        });
      } else if (document.uri.scheme === "file") {
        // VS Code took the language from the file's name or a guess (`.env` is "properties"): a switch for that
        // "language" would mean nothing to the user. This file, or its folder, is what they mean.
        items.push(...this.fileItems(document.uri, excluded));
      }
      if (excluded !== undefined && excluded.rule !== undefined && !excluded.rule.endsWith("(the default deny list)")) {
        items.push({
          label: "$(check) Let this file back in",
          description: `tabd.include (excluded: ${excluded.rule})`,
          run: () => this.addGlob("include", vscode.workspace.asRelativePath(document.uri, false)),
        });
      }
    }
    items.push(
      { label: "$(output) Show log output", run: () => vscode.commands.executeCommand("tabd.showOutput") },
      { label: "$(debug-restart) Restart the daemon", run: () => vscode.commands.executeCommand("tabd.restart") },
    );
    const picked = await vscode.window.showQuickPick(items, { title: "tabd" });
    await picked?.run();
  }

  /** "Exclude this file" / "Exclude this folder" (tabd.exclude: never read, no suggestions there). */
  private fileItems(uri: vscode.Uri, excluded?: { rule?: string }): (vscode.QuickPickItem & { run: () => unknown })[] {
    if (excluded !== undefined) {
      return []; // already kept out
    }
    const file = vscode.workspace.asRelativePath(uri, false);
    const slash = file.lastIndexOf("/");
    const items = [{ label: "$(circle-slash) Exclude this file", description: `tabd.exclude: ${file}`,
      run: () => this.addGlob("exclude", file) }];
    if (slash > 0) {
      const folder = `${file.slice(0, slash)}/**`;
      items.push({ label: "$(circle-slash) Exclude this folder", description: `tabd.exclude: ${folder}`,
        run: () => this.addGlob("exclude", folder) });
    }
    return items;
  }

  /** Adds a glob to tabd.exclude or tabd.include (the workspace's setting when a folder is open); the daemon
   * restarts with it. */
  private async addGlob(setting: "exclude" | "include", glob: string): Promise<void> {
    const config = vscode.workspace.getConfiguration("tabd");
    const target = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    const current = config.get<unknown>(setting);
    const list = Array.isArray(current) ? current.filter((g): g is string => typeof g === "string") : [];
    if (!list.includes(glob)) {
      await config.update(setting, [...list, glob], target);
    }
    void vscode.window.showInformationMessage(`tabd: added ${glob} to tabd.${setting}`);
  }
}

/** Every language the installed extensions declare, with its file extensions. */
function declaredLanguages(): LanguageContribution[] {
  const out: LanguageContribution[] = [];
  for (const extension of vscode.extensions.all) {
    const languages = (extension.packageJSON as { contributes?: { languages?: unknown } } | undefined)?.contributes?.languages;
    if (Array.isArray(languages)) {
      out.push(...(languages as LanguageContribution[]));
    }
  }
  return out;
}
