// Drives a running code-server (VS Code in the browser, its settings as shipped:
// auto-closing on) with headless Chromium: open a Python file, type, wait for ghost
// text, press Tab, wait for the next ghost text, read the tabd status bar item. Prints
// one JSON object on stdout; the test (tests/editors/test_vscode.py) checks it against
// the daemon's log.
//
// Scenarios: tab (type lines, Tab, the next ghost text, a word with Ctrl+Right, the
// status bar), pair (type an opener VS Code closes itself, `foo(` giving `foo(|)`: the
// ghost text inside the pair, Tab, the line and the cursor after it, the next ghost
// text), not-found (tabd.path names nothing), toggle (ghost text; `tabd: Toggle
// suggestions` off: the status item says so, typing and an explicit trigger bring none;
// on again: ghost text back; epoch times of both switches for the test to read the
// daemon's log between them), rename (next-edit suggestions: rename the first `count` on
// line 2 to `total` by typing; the edit drawn at the next `count` with a jump marker at the
// cursor; Tab jumps, Tab applies; the next one shown and applied; the daemon's copy checked), cycle (Alt+\
// asks, Alt+] / Alt+[ cycle through the invoked request's items, the status item says which, Tab accepts the one
// shown), one (#44: a next edit and ghost text never both under Tab), restricted (Restricted Mode said).
//
// node drive.mjs --url URL --file NAME [--type TEXT] [--chromium PATH] [--profile DIR]
//                [--shots DIR] [--ghost-timeout MS] [--deadline MS] [--warmup 0|1]
//                [--first-ghost-timeout MS] [--read-ms MS] [--expect REGEX] [--other FILE]
//                [--scenario tab|pair|not-found|toggle|rename|excluded|ghost|cycle|one|restricted]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--")) throw new Error(`unexpected argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  return out;
}

const args = parseArgs(process.argv.slice(2));
const url = args.url;
const fileName = args.file ?? "main.py";
const typed = args.type ?? "def read_config(path):";
const chromium = args.chromium ?? "/usr/bin/chromium";
const shots = args.shots;
const ghostTimeout = Number(args["ghost-timeout"] ?? 45000);
const deadline = Date.now() + Number(args.deadline ?? 240000);
const scenario = args.scenario ?? "tab";
const warmup = (args.warmup ?? "0") !== "0";
// How long the "user" reads a suggestion before pressing Tab (the daemon prefetches meanwhile).
const readMs = Number(args["read-ms"] ?? 2000);
// The first request also loads the model: give it longer.
const firstGhostTimeout = Number(args["first-ghost-timeout"] ?? 90000);
const warmupTimeout = Number(args["warmup-timeout"] ?? 60000);
const profile = args.profile ?? fs.mkdtempSync(path.join(os.tmpdir(), "tabd-chromium-"));

const t0 = Date.now();
const result = { ok: false, steps: [] };
const step = (what, extra = {}) => {
  const s = { t: (Date.now() - t0) / 1000, what, ...extra };
  result.steps.push(s);
  process.stderr.write(`[drive ${s.t.toFixed(1)}s] ${what} ${Object.keys(extra).length ? JSON.stringify(extra) : ""}\n`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const left = () => Math.max(0, deadline - Date.now());

// Whatever lies in elements whose class contains "ghost-text" (inline decorations and
// the view zones VS Code uses for the lines after the first).
async function ghostText(page) {
  return page.evaluate(() => {
    const els = [...document.querySelectorAll('.monaco-editor [class*="ghost-text"]')];
    // Nested matches (a zone and its spans) would double the text: keep outermost ones.
    const outer = els.filter((e) => !els.some((o) => o !== e && o.contains(e)));
    // Spans of one line (one parent) join directly; separate lines with a newline.
    const parts = [];
    let parent = null;
    for (const e of outer) {
      const text = (e.textContent ?? "").replace(/\u00a0/g, " ");
      if (parts.length && e.parentElement === parent) parts[parts.length - 1] += text;
      else parts.push(text);
      parent = e.parentElement;
    }
    return parts.join("\n");
  });
}

// The editor's visible lines without the ghost text, top to bottom.
async function editorLines(page) {
  return page.evaluate(() => {
    const editor = document.querySelector(".editor-instance .monaco-editor .view-lines")
      ?? document.querySelector(".monaco-editor .view-lines");
    if (!editor) return [];
    const lines = [...editor.querySelectorAll(":scope > .view-line")].map((line) => {
      const copy = line.cloneNode(true);
      copy.querySelectorAll('[class*="ghost-text"]').forEach((g) => g.remove());
      return { top: parseFloat(line.style.top || "0"), text: (copy.textContent ?? "").replace(/\u00a0/g, " ") };
    });
    return lines.sort((a, b) => a.top - b.top).map((l) => l.text);
  });
}

// The editor line that starts with `prefix`, as the user sees it: its text (ghost text
// left out) and, with the ghost text where VS Code renders it inside the line, withGhost.
async function lineStartingWith(page, prefix) {
  return page.evaluate((prefix) => {
    const editor = document.querySelector(".editor-instance .monaco-editor .view-lines")
      ?? document.querySelector(".monaco-editor .view-lines");
    for (const line of editor ? editor.querySelectorAll(":scope > .view-line") : []) {
      const copy = line.cloneNode(true);
      copy.querySelectorAll('[class*="ghost-text"]').forEach((g) => g.remove());
      const text = (copy.textContent ?? "").replace(/\u00a0/g, " ");
      if (text.startsWith(prefix)) {
        return { text, withGhost: (line.textContent ?? "").replace(/\u00a0/g, " ") };
      }
    }
    return null;
  }, prefix);
}

// The cursor as the status bar shows it ("Ln 11, Col 19"): 1-based line and column.
async function cursorPosition(page) {
  return page.evaluate(() => {
    for (const item of document.querySelectorAll(".statusbar-item")) {
      const m = /Ln (\d+), Col (\d+)/.exec(item.textContent ?? "");
      if (m) return { line: Number(m[1]), column: Number(m[2]) };
    }
    return null;
  });
}

async function statusBarText(page) {
  return page.evaluate(() => {
    const items = [...document.querySelectorAll(".statusbar-item")];
    const item = items.find((e) => /tabd/.test(e.textContent ?? "") || /tabd/.test(e.getAttribute("aria-label") ?? ""));
    return item ? (item.textContent ?? "").trim() || item.getAttribute("aria-label") : null;
  });
}

async function waitFor(fn, timeoutMs, intervalMs = 100) {
  const end = Date.now() + Math.min(timeoutMs, left());
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() >= end) return null;
    await sleep(intervalMs);
  }
}

async function shot(page, name) {
  if (!shots || !page) return;
  try {
    fs.mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: path.join(shots, `${name}.png`) });
  } catch (err) {
    step("screenshot failed", { error: String(err) });
  }
}

// A command by its title, through the command palette (F1).
async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 10000 }).catch(() => null);
  if (!input) return false;
  await page.keyboard.type(title, { delay: 20 });
  await waitFor(() => page.$(".quick-input-list .monaco-list-row"), 5000);
  await sleep(300);
  await page.keyboard.press("Enter");
  return true;
}

// editor.action.inlineSuggest.trigger (an explicit request), through the command palette.
async function trigger(page) {
  return runCommand(page, "Trigger Inline Suggestion");
}

async function openFile(page) {
  return openFileNamed(page, fileName);
}

async function openFileNamed(page, fileName) {
  const tabSelector = `.tabs-container .tab[aria-label*="${fileName}"]`;
  // Quick open (Ctrl+P), then the explorer as a fallback.
  for (let attempt = 0; attempt < 3 && left() > 0; attempt++) {
    await page.keyboard.down("Control");
    await page.keyboard.press("KeyP");
    await page.keyboard.up("Control");
    const input = await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 10000 }).catch(() => null);
    if (input) {
      await page.keyboard.type(fileName, { delay: 30 });
      await waitFor(() => page.$(".quick-input-list .monaco-list-row"), 10000);
      await sleep(300);
      await page.keyboard.press("Enter");
      if (await page.waitForSelector(tabSelector, { timeout: 10000 }).catch(() => null)) return "quick open";
    }
    await page.keyboard.press("Escape");
    const row = await page.$(`.explorer-folders-view .monaco-list-row[aria-label*="${fileName}"]`);
    if (row) {
      await row.click();
      if (await page.waitForSelector(tabSelector, { timeout: 10000 }).catch(() => null)) return "explorer";
    }
    await sleep(1000);
  }
  throw new Error(`could not open ${fileName}`);
}

// tabd.path names nothing (or a tabd that exits at start: --expect names its message): the extension must say so
// (a notification) instead of failing quietly; once, a restart of the daemon does not say it again.
async function notFoundScenario(page) {
  const expect = args.expect ?? "cannot find the tabd executable";
  const messages = () => page.evaluate((source) => {
    const re = new RegExp(source);
    return [...document.querySelectorAll(".notification-list-item-message")]
      .map((e) => e.textContent ?? "").filter((t) => re.test(t));
  }, expect);
  result.notFoundMessage = (await waitFor(async () => (await messages())[0], 60000, 250)) ?? null;
  result.status = await statusBarText(page);
  result.notifications = await page.evaluate(() =>
    [...document.querySelectorAll(".notification-list-item-message")].map((e) => e.textContent ?? ""));
  step("not found", { message: result.notFoundMessage, status: result.status, notifications: result.notifications });
  await shot(page, "not-found");
  await runCommand(page, "tabd: Restart the daemon");
  await sleep(5000);
  result.sameMessages = (await messages()).length;
  result.statusAfterRestart = await statusBarText(page);
  step("after a restart", { messages: result.sameMessages, status: result.statusAfterRestart });
  result.ok = Boolean(result.notFoundMessage);
}

// Restricted Mode (the folder not trusted): no daemon, said once in a notification and in the status item.
async function restrictedScenario(page) {
  result.trustMessage = await waitFor(() => notification(page, "Restricted Mode"), 60000, 250);
  result.status = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && /Restricted Mode/.test(s) ? s : null;
  }, 20000, 250) ?? (await statusBarText(page));
  await page.keyboard.type(typed.split("\\n")[0], { delay: 40 });
  result.ghost = await waitFor(someGhost(page), 3000);
  step("restricted", { message: result.trustMessage, status: result.status, ghost: result.ghost });
  await shot(page, "restricted");
  result.ok = Boolean(result.trustMessage);
}

// Wait for the extension to have started the daemon (its first tabd/stats answer) before typing.
async function waitForDaemon(page) {
  result.statusBeforeTyping = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && /no accepts|no Tabs|hit/.test(s) ? s : null;
  }, 120000, 250) ?? (await statusBarText(page));
  step("status bar", { text: result.statusBeforeTyping });
}

const someGhost = (page) => async () => (await ghostText(page)).trim() ? ghostText(page) : null;

// Tab, noting when (epoch seconds, the daemon log's clock) so the test finds the accept it made.
async function pressTab(page) {
  result.tabAt = Date.now() / 1000;
  await page.keyboard.press("Tab");
  step("Tab", { afterMs: readMs });
}

// Type, see ghost text, Tab, see the next ghost text, take a word of it, read the status bar.
async function tabScenario(page) {
  await waitForDaemon(page);

  // Optional warm-up (--warmup 1): the daemon loads its model on the first request; ask
  // once explicitly and let it finish before typing. Off by default: typing straight
  // away (every keystroke cancelling the request before) is what a person does.
  if (warmup) {
    await trigger(page);
    const w = await waitFor(async () => (await ghostText(page)).trim() ? ghostText(page) : null, warmupTimeout);
    result.warmupGhost = w;
    step("warm-up", { ghost: w });
    await page.keyboard.press("Escape");
    await sleep(300);
  }
  await shot(page, "1-opened");

  // Type, then wait for ghost text; an explicit trigger if typing alone didn't bring one.
  const lines = typed.split("\\n");
  let ghost1 = null;
  for (let round = 0; round < 3 && !ghost1 && left() > 0; round++) {
    const text = lines[Math.min(round, lines.length - 1)];
    if (round > 0) await page.keyboard.press("Enter");
    await page.keyboard.type(text, { delay: 60 });
    step("typed", { text });
    ghost1 = await waitFor(async () => (await ghostText(page)).trim() ? ghostText(page) : null,
      round === 0 && !warmup ? firstGhostTimeout : ghostTimeout);
    if (!ghost1) {
      await trigger(page);
      step("no ghost text after typing: triggered");
      ghost1 = await waitFor(async () => (await ghostText(page)).trim() ? ghostText(page) : null, ghostTimeout / 2);
    }
  }
  await shot(page, "2-ghost");
  if (!ghost1) throw new Error("no ghost text after typing");
  result.ghost1 = ghost1;
  result.linesBeforeTab = await editorLines(page);
  step("ghost text", { ghost: ghost1 });

  await sleep(readMs);
  ghost1 = (await ghostText(page)) || ghost1;
  result.ghost1 = ghost1;
  result.statusBeforeTab = await statusBarText(page); // typing (through suggestions, too) is no Tab
  await pressTab(page);
  // The accepted text is now in the document; the next suggestion should follow on its own.
  await waitFor(async () => !(await ghostText(page)).trim() || (await ghostText(page)) !== ghost1, 1500, 20);
  result.linesAfterTab = await editorLines(page);
  let ghost2 = await waitFor(async () => (await ghostText(page)).trim() ? ghostText(page) : null, 20000, 50);
  result.ghost2Triggered = false;
  if (!ghost2) {
    await trigger(page);
    result.ghost2Triggered = true;
    step("no ghost text after Tab: triggered");
    ghost2 = await waitFor(async () => (await ghostText(page)).trim() ? ghostText(page) : null, 15000, 50);
  }
  result.ghost2 = ghost2;
  step("ghost text after Tab", { ghost: ghost2 });
  await shot(page, "3-after-tab");

  // Word accept: Ctrl+Right (editor.action.inlineSuggest.acceptNextWord) takes part of it.
  if (ghost2) {
    const before = (await editorLines(page)).join("\n");
    await page.keyboard.down("Control");
    await page.keyboard.press("ArrowRight");
    await page.keyboard.up("Control");
    const after = await waitFor(async () => {
      const now = (await editorLines(page)).join("\n");
      return now.length > before.length ? now : null;
    }, 3000, 50);
    result.wordAccept = {
      inserted: after ? after.slice(before.length) : null,
      ghostAfter: await ghostText(page),
    };
    step("word accept", result.wordAccept);
    await shot(page, "4-word-accept");
  }

  // The status bar polls tabd/stats; after one accept it shows latency and hit rate.
  result.status = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && /hit/.test(s) ? s : null;
  }, 10000, 250) ?? (await statusBarText(page));
  step("status bar", { text: result.status });
  result.ok = Boolean(ghost1 && ghost2);
}

// `--type` holds openers VS Code closes itself, one line each (`def read_config(`,
// `print(len(`): for each, on a line of its own, the ghost text shows inside the pair,
// Tab writes the suggestion over the editor's closer, and the cursor ends after it; then
// the next ghost text. One record per opener in result.pairs.
async function pairScenario(page) {
  await waitForDaemon(page);
  await shot(page, "1-opened");
  result.pairs = [];
  const openers = typed.split("\\n");
  for (const [n, opener] of openers.entries()) {
    if (n > 0) {
      await page.keyboard.press("Escape");
      await page.keyboard.press("End");
      await page.keyboard.press("Enter");
    }
    const pair = { opener };
    result.pairs.push(pair);
    await typeIntoPair(page, pair, n === 0 ? firstGhostTimeout : ghostTimeout);
    await shot(page, `${n + 2}-pair-after-tab`);
  }
  result.ok = result.pairs.every((p) => p.lineAfterTab && p.ghost2);
}

async function typeIntoPair(page, pair, firstTimeout) {
  const opener = pair.opener;
  await page.keyboard.type(opener, { delay: 60 });
  step("typed", { text: opener });
  // The ghost text the user sees at the cursor: inline in the line, so the line reads
  // differently with it than without it.
  const inPair = async () => {
    const line = await lineStartingWith(page, opener);
    return line && line.withGhost !== line.text && (await ghostText(page)).trim() ? line : null;
  };
  let line = await waitFor(inPair, firstTimeout);
  if (!line) {
    await trigger(page);
    step("no ghost text after typing: triggered");
    line = await waitFor(inPair, ghostTimeout);
  }
  pair.lineBeforeTab = line ?? (await lineStartingWith(page, opener));
  pair.ghost1 = await ghostText(page);
  pair.cursorBeforeTab = await cursorPosition(page);
  step("ghost text", { line: pair.lineBeforeTab, ghost: pair.ghost1, cursor: pair.cursorBeforeTab });
  if (!line) throw new Error(`no ghost text inside the pair after ${opener}`);

  await sleep(readMs);
  await pressTab(page);
  pair.tabAt = result.tabAt;
  const before = line.text;
  pair.lineAfterTab = await waitFor(async () => {
    const now = await lineStartingWith(page, opener);
    return now && now.text !== before ? now : null;
  }, 3000, 20);
  // The status bar follows the cursor a moment later.
  const was = JSON.stringify(pair.cursorBeforeTab);
  pair.cursorAfterTab = await waitFor(async () => {
    const now = await cursorPosition(page);
    return now && JSON.stringify(now) !== was ? now : null;
  }, 3000, 20) ?? (await cursorPosition(page));
  step("after Tab", { line: pair.lineAfterTab, cursor: pair.cursorAfterTab });

  pair.ghost2 = await waitFor(someGhost(page), 20000, 50);
  pair.ghost2Triggered = false;
  if (!pair.ghost2) {
    await trigger(page);
    pair.ghost2Triggered = true;
    step("no ghost text after Tab: triggered");
    pair.ghost2 = await waitFor(someGhost(page), 15000, 50);
  }
  step("ghost text after Tab", { ghost: pair.ghost2 });
}

// Type `--type`'s lines until ghost text shows (an explicit trigger after each line that brought none).
async function typeUntilGhost(page, lines, firstTimeout) {
  let ghost = null;
  for (let round = 0; round < lines.length && !ghost && left() > 0; round++) {
    if (round > 0) {
      await page.keyboard.press("Escape");
      await page.keyboard.press("End");
      await page.keyboard.press("Enter");
    }
    await page.keyboard.type(lines[round], { delay: 60 });
    step("typed", { text: lines[round] });
    ghost = await waitFor(someGhost(page), round === 0 ? firstTimeout : ghostTimeout);
    if (!ghost) {
      await trigger(page);
      step("no ghost text after typing: triggered");
      ghost = await waitFor(someGhost(page), ghostTimeout / 2);
    }
  }
  return ghost;
}

// Ghost text with the defaults, none while switched off (typing, then an explicit trigger), back when on.
async function toggleScenario(page) {
  await waitForDaemon(page);
  const lines = typed.split("\\n");
  const half = Math.ceil(lines.length / 2);
  result.ghostBefore = await typeUntilGhost(page, lines.slice(0, half), firstGhostTimeout);
  step("ghost text", { ghost: result.ghostBefore });
  await shot(page, "1-ghost");
  await page.keyboard.press("Escape");

  await runCommand(page, "tabd: Toggle suggestions (enable/disable)");
  result.statusOff = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && /disabled/.test(s) ? s : null;
  }, 10000, 100);
  step("toggled off", { status: result.statusOff });
  await sleep(1000); // a request already on its way before the switch may still land
  result.offAt = Date.now() / 1000;
  await page.keyboard.press("End");
  await page.keyboard.press("Enter");
  await page.keyboard.type(lines[0], { delay: 60 });
  result.ghostWhileOff = await waitFor(someGhost(page), 5000);
  await trigger(page);
  result.ghostWhileOff = result.ghostWhileOff ?? (await waitFor(someGhost(page), 5000));
  step("typed while off", { ghost: result.ghostWhileOff });
  await shot(page, "2-off");
  result.onAt = Date.now() / 1000;

  // On again through the status item: a click opens the menu, its first entry enables.
  await page.evaluate(() => {
    const items = [...document.querySelectorAll(".statusbar-item")];
    const item = items.find((e) => /tabd/.test(e.textContent ?? ""));
    (item?.querySelector("a") ?? item)?.click();
  });
  await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 10000 });
  await waitFor(() => page.$(".quick-input-list .monaco-list-row"), 5000);
  result.menu = await page.evaluate(() =>
    [...document.querySelectorAll(".quick-input-list .monaco-list-row")].map((r) => (r.getAttribute("aria-label") ?? r.textContent ?? "").trim()));
  step("menu", { items: result.menu });
  await page.keyboard.type("Enable suggestions", { delay: 20 });
  await sleep(300);
  await page.keyboard.press("Enter");
  result.statusOn = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && !/disabled/.test(s) ? s : null;
  }, 10000, 100);
  step("toggled on", { status: result.statusOn });
  await page.keyboard.press("Escape");
  await page.keyboard.press("End");
  await page.keyboard.press("Enter");
  result.ghostAfter = await typeUntilGhost(page, half < lines.length ? lines.slice(half) : lines, ghostTimeout);
  step("ghost text after toggling on", { ghost: result.ghostAfter });
  await shot(page, "3-on");

  // Snooze: 0 minutes is refused with an error; 0.1 (6 s) snoozes, and suggestions come back by themselves.
  const snooze = async (minutes) => {
    await page.keyboard.press("Escape");
    await runCommand(page, "tabd: Snooze suggestions");
    await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 10000 });
    await sleep(300);
    await page.keyboard.down("Control");
    await page.keyboard.press("KeyA");
    await page.keyboard.up("Control");
    await page.keyboard.type(minutes, { delay: 30 });
    await page.keyboard.press("Enter");
  };
  await snooze("0");
  result.snoozeZero = await waitFor(() => notification(page, "snooze needs"), 5000, 100);
  result.statusAfterZero = await statusBarText(page);
  step("snooze 0", { message: result.snoozeZero, status: result.statusAfterZero });
  await snooze("0.1");
  result.statusSnoozed = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && /snoozed/.test(s) ? s : null;
  }, 5000, 100);
  result.snoozedAt = Date.now() / 1000;
  await page.keyboard.press("Escape");
  await page.keyboard.press("End");
  await page.keyboard.press("Enter");
  await page.keyboard.type(lines[0], { delay: 40 });
  result.ghostWhileSnoozed = await waitFor(someGhost(page), 2000);
  step("typed while snoozed", { status: result.statusSnoozed, ghost: result.ghostWhileSnoozed });
  result.snoozeCheckedAt = Date.now() / 1000;
  result.statusAfterSnooze = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && !/snoozed/.test(s) ? s : null;
  }, 20000, 200);
  await page.keyboard.press("Escape");
  await page.keyboard.press("End");
  await page.keyboard.press("Enter");
  result.ghostAfterSnooze = await typeUntilGhost(page, lines, ghostTimeout);
  step("after the snooze", { status: result.statusAfterSnooze, ghost: result.ghostAfterSnooze });

  // Off for this language only (tabd.enable), then on again.
  await page.keyboard.press("Escape");
  await runCommand(page, "tabd: Toggle suggestions for this language");
  result.statusLanguageOff = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && /off for/.test(s) ? s : null;
  }, 10000, 100);
  result.languageOffAt = Date.now() / 1000;
  await page.keyboard.press("End");
  await page.keyboard.press("Enter");
  await page.keyboard.type(lines[0], { delay: 40 });
  result.ghostLanguageOff = await waitFor(someGhost(page), 2000);
  result.languageOnAt = Date.now() / 1000;
  step("off for the language", { status: result.statusLanguageOff, ghost: result.ghostLanguageOff });
  await runCommand(page, "tabd: Toggle suggestions for this language");
  result.statusLanguageOn = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && !/off for/.test(s) ? s : null;
  }, 10000, 100);
  step("on for the language", { status: result.statusLanguageOn });
  result.ok = Boolean(result.ghostBefore && !result.ghostWhileOff && result.ghostAfter && result.ghostAfterSnooze);
}

// What the extension draws for a next edit, per editor line (0-based, the file is short enough to be all
// visible): the text struck through (the range to replace) and the decorations' labels (CSS ::after content,
// which is how VS Code renders an extension's `after` decoration).
async function editView(page) {
  return page.evaluate(() => {
    const editor = document.querySelector(".editor-instance .monaco-editor .view-lines");
    if (!editor) return [];
    const lines = [...editor.querySelectorAll(":scope > .view-line")]
      .sort((a, b) => parseFloat(a.style.top || "0") - parseFloat(b.style.top || "0"));
    const unquote = (c) => (c && c !== "none" && c !== "normal" ? JSON.parse(c) : null);
    return lines.map((line) => {
      const struck = [];
      const labels = [];
      for (const span of line.querySelectorAll("span")) {
        const style = getComputedStyle(span);
        if (style.textDecorationLine.includes("line-through") && span.children.length === 0) struck.push(span.textContent);
        for (const pseudo of ["::before", "::after"]) {
          let text = null;
          try { text = unquote(getComputedStyle(span, pseudo).content); } catch { text = null; }
          if (text) labels.push(text);
        }
      }
      const copy = line.cloneNode(true);
      copy.querySelectorAll('[class*="ghost-text"]').forEach((g) => g.remove());
      return { text: (copy.textContent ?? "").replace(/\u00a0/g, " "), struck: struck.join(""), labels };
    });
  });
}

// The first line (0-based) whose drawing shows a next edit: something struck through or a label.
const editShown = (view) => view.findIndex((l) => l.struck || l.labels.some((t) => !/Tab: jump/.test(t)));
const markerLine = (view) => view.findIndex((l) => l.labels.some((t) => /Tab: jump to line/.test(t)));

async function notification(page, pattern) {
  return page.evaluate((source) => {
    const re = new RegExp(source);
    const items = [...document.querySelectorAll(".notification-list-item-message")];
    const hit = items.find((e) => re.test(e.textContent ?? ""));
    return hit ? hit.textContent : null;
  }, pattern);
}

// Ghost text (an inline completion) keeps Tab: hide it so Tab reaches the next edit, as a user would.
async function hideGhost(page) {
  if ((await ghostText(page)).trim()) {
    await page.keyboard.press("Escape");
    await waitFor(async () => !(await ghostText(page)).trim(), 2000, 50);
    step("ghost text hidden");
  }
}

// Waits for a next edit to be drawn and records it in result.edits.
async function waitForEdit(page, label, timeoutMs) {
  const view = await waitFor(async () => {
    const v = await editView(page);
    return editShown(v) >= 0 ? v : null;
  }, timeoutMs, 100);
  const record = {
    label,
    at: Date.now() / 1000, // epoch seconds, the daemon log's clock
    line: view ? editShown(view) : -1,
    marker: view ? markerLine(view) : -1,
    view: view ? view.filter((l) => l.struck || l.labels.length) : null,
    cursor: await cursorPosition(page),
  };
  result.edits.push(record);
  step("edit shown", record);
  await shot(page, `edit-${result.edits.length}`);
  return record;
}

// The tabd status item's tooltip (a hover over it), as text.
async function statusTooltipText(page) {
  const box = await page.evaluate(() => {
    const items = [...document.querySelectorAll(".statusbar-item")];
    const item = items.find((e) => /tabd/.test(e.textContent ?? ""));
    if (!item) return null;
    const r = item.getBoundingClientRect();
    return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
  });
  if (!box) return null;
  await page.mouse.move(box.x, box.y);
  const text = await waitFor(() => page.evaluate(() => {
    const hover = [...document.querySelectorAll(".workbench-hover, .monaco-hover")]
      .find((h) => h.offsetParent !== null && /tabd/.test(h.textContent ?? ""));
    return hover ? hover.textContent : null;
  }), 5000, 100);
  await page.mouse.move(5, 5);
  return text;
}

async function renameScenario(page) {
  await waitForDaemon(page);
  result.edits = [];
  // Line 2 (Ctrl+G), its first word: the first `count`.
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyG");
  await page.keyboard.up("Control");
  await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 10000 });
  await page.keyboard.type("2", { delay: 30 });
  await page.keyboard.press("Enter");
  await sleep(300);
  await page.keyboard.press("End");
  await page.keyboard.press("Home");
  await page.keyboard.down("Shift");
  await page.keyboard.down("Control");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.up("Control");
  await page.keyboard.up("Shift");
  await page.keyboard.type("total", { delay: 120 });
  step("renamed the first", { cursor: await cursorPosition(page) });

  let edit = await waitForEdit(page, "after the rename", firstGhostTimeout);
  if (edit.line < 0) throw new Error("no next edit drawn after the rename");
  await hideGhost(page);
  result.tabAt = Date.now() / 1000;
  await page.keyboard.press("Tab");
  result.afterJump = await waitFor(async () => {
    const c = await cursorPosition(page);
    return c && c.line !== edit.cursor?.line ? c : null;
  }, 3000, 50) ?? (await cursorPosition(page));
  result.markerAfterJump = markerLine(await editView(page));
  step("Tab (jump)", { cursor: result.afterJump, marker: result.markerAfterJump });
  await page.keyboard.press("Tab");
  const applied = edit.line;
  result.lineApplied1 = await waitFor(async () => {
    const v = await editView(page);
    return v[applied] && !/count/.test(v[applied].text) ? v[applied].text : null;
  }, 3000, 50);
  // The status bar follows the cursor a moment later.
  const jumped = JSON.stringify(result.afterJump);
  result.cursorAfterApply1 = await waitFor(async () => {
    const now = await cursorPosition(page);
    return now && JSON.stringify(now) !== jumped ? now : null;
  }, 3000, 20) ?? (await cursorPosition(page));
  step("Tab (apply)", { line: result.lineApplied1, cursor: result.cursorAfterApply1 });

  edit = await waitForEdit(page, "after the first Tab", ghostTimeout);
  if (edit.line < 0) throw new Error("no next edit drawn after applying one");
  await hideGhost(page);
  await page.keyboard.press("Tab");
  if (edit.marker >= 0) await page.keyboard.press("Tab");
  const second = edit.line;
  result.lineApplied2 = await waitFor(async () => {
    const v = await editView(page);
    return v[second] && !/count/.test(v[second].text) ? v[second].text : null;
  }, 3000, 50);
  step("Tab (apply)", { line: result.lineApplied2 });
  await sleep(1500);
  result.editAfterLast = editShown(await editView(page));

  await runCommand(page, "tabd: Check the daemon's copy of this document");
  result.sync = await waitFor(() => notification(page, "tabd: the daemon's copy"), 10000, 100);
  step("sync", { message: result.sync });
  result.finalText = (await editorLines(page)).join("\n");
  await sleep(1000); // the status item polls tabd/stats every 500 ms in the test
  result.tooltip = await statusTooltipText(page);
  step("tooltip", { text: result.tooltip });
  await shot(page, "rename-done");

  // Rename again (`total` -> `size` on line 2), and dismiss the edit that follows with Esc.
  await page.click(".editor-instance .monaco-editor .view-lines");
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyG");
  await page.keyboard.up("Control");
  await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 10000 });
  await page.keyboard.type("2", { delay: 30 });
  await page.keyboard.press("Enter");
  await sleep(300);
  await page.keyboard.press("End");
  await page.keyboard.press("Home");
  await page.keyboard.down("Shift");
  await page.keyboard.down("Control");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.up("Control");
  await page.keyboard.up("Shift");
  await page.keyboard.type("size", { delay: 120 });
  edit = await waitForEdit(page, "after the second rename", ghostTimeout);
  await hideGhost(page);
  await page.keyboard.press("Escape");
  result.editAfterEscape = await waitFor(async () => {
    const i = editShown(await editView(page));
    return i < 0 ? String(i) : null;
  }, 3000, 50);
  result.linesAfterEscape = await editorLines(page);
  step("Esc", { edit: result.editAfterEscape });
  await sleep(1000);
  result.tooltipAfterEscape = await statusTooltipText(page);
  step("tooltip", { text: result.tooltipAfterEscape });
  result.ok = Boolean(result.lineApplied1 && result.lineApplied2 && result.sync);
}

// A file the daemon excludes (tabd.exclude): typing and an explicit trigger bring no ghost text, and the
// status item says why.
async function excludedScenario(page) {
  await waitForDaemon(page);
  await page.keyboard.type(typed.split("\\n")[0], { delay: 60 });
  result.ghost = await waitFor(someGhost(page), 3000);
  await trigger(page);
  result.status = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && /excluded/.test(s) ? s : null;
  }, 30000, 200) ?? (await statusBarText(page));
  result.ghost = result.ghost ?? (await waitFor(someGhost(page), 2000));
  result.tooltip = await statusTooltipText(page);
  step("excluded", { status: result.status, ghost: result.ghost, tooltip: result.tooltip });
  await shot(page, "excluded");
  result.menu = await statusMenu(page);
  step("menu", { items: result.menu });
  result.ok = Boolean(result.status && /excluded/.test(result.status) && !result.ghost);

  // --other FILE: a file the daemon serves, whose answers its gate holds back (the test sets the gate):
  // the status item leaves "excluded" behind, its tooltip says "unsure".
  if (args.other) {
    await openFileNamed(page, args.other);
    await page.waitForSelector(".editor-instance .monaco-editor .view-lines", { visible: true, timeout: 20000 });
    await sleep(500);
    await page.click(".editor-instance .monaco-editor .view-lines");
    await page.keyboard.down("Control");
    await page.keyboard.press("End");
    await page.keyboard.up("Control");
    await page.keyboard.type(typed.split("\\n")[0], { delay: 60 });
    result.otherTooltip = await waitFor(async () => {
      const t = await statusTooltipText(page);
      return t && /Last empty answer: unsure/.test(t) ? t : null;
    }, 30000, 500) ?? (await statusTooltipText(page));
    result.otherStatus = await statusBarText(page);
    result.otherGhost = await ghostText(page);
    step("other file", { status: result.otherStatus, tooltip: result.otherTooltip, ghost: result.otherGhost });
    await shot(page, "other");
  }
}

// The status item's menu (a click on it): its entries, then Esc.
async function statusMenu(page) {
  await page.evaluate(() => {
    const items = [...document.querySelectorAll(".statusbar-item")];
    const item = items.find((e) => /tabd/.test(e.textContent ?? ""));
    (item?.querySelector("a") ?? item)?.click();
  });
  await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 10000 }).catch(() => null);
  await waitFor(() => page.$(".quick-input-list .monaco-list-row"), 5000);
  const rows = await page.evaluate(() =>
    [...document.querySelectorAll(".quick-input-list .monaco-list-row")].map((r) => (r.getAttribute("aria-label") ?? r.textContent ?? "").trim()));
  await page.keyboard.press("Escape");
  return rows;
}

// One suggestion at a time under Tab (#44): rename the first `count` on line 2 to `total` by typing, with ghost
// text on (the test's model suggests everywhere). When the next edit is drawn (on the line below), no ghost text
// shows beside it, and none comes back while the cursor stays, not even asked for with Alt+\; Tab takes the edit
// (line 2 keeps what was typed). Then typing dismisses the edit that follows, and ghost text comes back.
async function oneScenario(page) {
  await waitForDaemon(page);
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyG");
  await page.keyboard.up("Control");
  await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 10000 });
  await page.keyboard.type("2", { delay: 30 });
  await page.keyboard.press("Enter");
  await sleep(300);
  await page.keyboard.press("End");
  await page.keyboard.press("Home");
  await page.keyboard.down("Shift");
  await page.keyboard.down("Control");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.up("Control");
  await page.keyboard.up("Shift");
  await page.keyboard.type("total", { delay: 120 });
  // (--late 1: the ghost text's answer comes after the edit is drawn; nothing shows while typing)
  result.ghostWhileTyping = args.late === "1" ? null : await waitFor(someGhost(page), firstGhostTimeout, 50);
  step("renamed the first", { cursor: await cursorPosition(page), ghost: result.ghostWhileTyping });
  await shot(page, "1-ghost");
  result.edits = [];
  // what shows until the edit is drawn: ghost text, then (with the rule) not
  result.timeline = [];
  const sample = async () => {
    const g = (await ghostText(page)).trim();
    const e = editShown(await editView(page)) >= 0;
    const last = result.timeline[result.timeline.length - 1];
    if (!last || last.ghost !== g || last.edit !== e) result.timeline.push({ t: Date.now() - t0, ghost: g, edit: e });
    return { g, e };
  };
  await waitFor(async () => (await sample()).e, firstGhostTimeout, 30);
  const edit = await waitForEdit(page, "after the rename", firstGhostTimeout);
  await sleep(400); // a ghost text answered in the same instant as the edit is hidden within a moment
  result.ghostWithEdit = await ghostText(page);
  // a while with every chance for ghost text to come back: Alt+\ asks for it (the fixture model has one here)
  await altKey(page, "Backslash");
  let seen = "";
  const end = Date.now() + 2500;
  while (Date.now() < end) {
    seen = seen || (await sample()).g;
    await sleep(30);
  }
  result.ghostWhileEditShown = seen;
  const before = await editorLines(page);
  step("edit shown", { ghost: result.ghostWithEdit, later: seen });
  result.tabAt = Date.now() / 1000;
  await page.keyboard.press("Tab");
  result.linesAfterTab = await waitFor(async () => {
    const now = await editorLines(page);
    return now.join("\n") !== before.join("\n") ? now : null;
  }, 3000, 50) ?? (await editorLines(page));
  result.afterTab = await waitFor(async () => {
    const c = await cursorPosition(page);
    return c && c.line !== edit.cursor?.line ? c : null;
  }, 3000, 50) ?? (await cursorPosition(page));
  step("Tab", { cursor: result.afterTab, lines: result.linesAfterTab });
  await shot(page, "2-after-tab");
  // Typing (at the end of the line the edit is on): the edit goes, ghost text comes back.
  await page.keyboard.press("End");
  await page.keyboard.type(" ", { delay: 60 });
  result.ghostAfterTyping = await waitFor(someGhost(page), ghostTimeout, 50);
  result.editAfterTyping = editShown(await editView(page));
  step("typed", { ghost: result.ghostAfterTyping, edit: result.editAfterTyping });
  await shot(page, "3-typed");
  result.ok = Boolean(edit.line >= 0 && result.afterTab);
}

// Type `--type`'s lines until ghost text shows; nothing more (a language's first suggestion).
async function ghostScenario(page) {
  await waitForDaemon(page);
  result.ghost = await typeUntilGhost(page, typed.split("\\n"), firstGhostTimeout);
  result.lines = await editorLines(page);
  step("ghost text", { ghost: result.ghost });
  await shot(page, "ghost");
  result.ok = Boolean(result.ghost);
}

// A key with Alt held (Option on macOS): VS Code's inline suggestion keys, Alt+\ (ask), Alt+] / Alt+[ (cycle).
async function altKey(page, code) {
  await page.keyboard.down("Alt");
  await page.keyboard.press(code);
  await page.keyboard.up("Alt");
}

// Alternatives (#27): type `--type`; the automatic answer is held back by the gate (the test sets it: the
// tooltip says "unsure" and nothing shows), so the ghost text that follows Alt+\ is the invoked request's.
// Alt+] shows the next item, Alt+[ the one before; Alt+] again, and Tab accepts the one shown. The keys as
// shipped: Alt+\ is the extension's (VS Code binds none to "Trigger Inline Suggestion"), Alt+] / Alt+[ VS Code's.
async function cycleScenario(page) {
  await waitForDaemon(page);
  await page.keyboard.type(typed, { delay: 60 });
  step("typed", { text: typed });
  result.tooltipBeforeAsk = await waitFor(async () => {
    const t = await statusTooltipText(page);
    return t && /Last empty answer: unsure/.test(t) ? t : null;
  }, firstGhostTimeout, 500) ?? (await statusTooltipText(page));
  result.ghostBeforeAsk = await ghostText(page);
  step("automatic answer", { tooltip: result.tooltipBeforeAsk, ghost: result.ghostBeforeAsk });
  // Alt+] with nothing to cycle: the status item says so.
  await altKey(page, "BracketRight");
  result.noteNone = await waitFor(async () => {
    const s = await statusBarText(page);
    return s && /suggestion/.test(s) ? s : null;
  }, 5000, 50);
  step("Alt+] with none", { status: result.noteNone });

  await altKey(page, "Backslash");
  result.ghostAsked = await waitFor(someGhost(page), ghostTimeout, 50);
  step("Alt+\\", { ghost: result.ghostAsked });
  await shot(page, "1-asked");
  // Each key waits for the ghost text to change (VS Code asks again, explicitly, before it moves).
  const changedFrom = (was) => async () => {
    const g = await ghostText(page);
    return g.trim() && g !== was ? g : null;
  };
  result.notes = [];
  const cycle = async (code, was, name) => {
    await altKey(page, code);
    const g = await waitFor(changedFrom(was), 10000, 50) ?? (await ghostText(page));
    // which item is on screen, in the status item ("suggestion 2 of 2")
    const noted = await waitFor(async () => {
      const s = await statusBarText(page);
      return s && / of \d/.test(s) && s !== result.notes[result.notes.length - 1] ? s : null;
    }, 3000, 50) ?? (await statusBarText(page));
    result.notes.push(noted);
    step(name, { ghost: g, status: noted });
    await shot(page, name);
    return g;
  };
  result.ghostNext = await cycle("BracketRight", result.ghostAsked, "2-alt-next");
  result.ghostPrevious = await cycle("BracketLeft", result.ghostNext, "3-alt-previous");
  result.ghostAtTab = await cycle("BracketRight", result.ghostPrevious, "4-alt-next-again");

  await sleep(300);
  result.ghostAtTab = (await ghostText(page)) || result.ghostAtTab;
  const before = (await editorLines(page)).join("\n");
  await pressTab(page);
  result.linesAfterTab = await waitFor(async () => {
    const now = await editorLines(page);
    return now.join("\n") !== before ? now : null;
  }, 3000, 20) ?? (await editorLines(page));
  result.cursorAfterTab = await waitFor(async () => {
    const c = await cursorPosition(page);
    return c && c.column > typed.length + 1 ? c : null;
  }, 3000, 20) ?? (await cursorPosition(page));
  step("Tab", { lines: result.linesAfterTab, cursor: result.cursorAfterTab });
  await shot(page, "5-after-tab");

  await page.keyboard.press("Escape"); // whatever shows after the accept
  await runCommand(page, "tabd: Check the daemon's copy of this document");
  result.sync = await waitFor(() => notification(page, "tabd: the daemon's copy"), 10000, 100);
  step("sync", { message: result.sync });
  result.ok = Boolean(result.ghostAsked && result.ghostNext && result.ghostAtTab && result.sync);
}

const SCENARIOS = { ghost: ghostScenario, excluded: excludedScenario, rename: renameScenario, tab: tabScenario, pair: pairScenario, "not-found": notFoundScenario, toggle: toggleScenario, cycle: cycleScenario, one: oneScenario, restricted: restrictedScenario };

let browser;
let page;
try {
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: profile,
    protocolTimeout: 60000,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--window-size=1400,900",
    ],
    defaultViewport: { width: 1400, height: 900 },
  });
  page = await browser.newPage();
  page.on("pageerror", (err) => step("page error", { error: String(err).slice(0, 300) }));
  step("browser up", { version: await browser.version() });

  await page.goto(url, { waitUntil: "domcontentloaded", timeout: 60000 });
  await page.waitForSelector(".monaco-workbench", { timeout: 90000 });
  await page.waitForSelector(".explorer-folders-view .monaco-list-row", { timeout: 90000 }).catch(() => null);
  step("workbench loaded");

  result.opened = await openFile(page);
  step("file opened", { how: result.opened });
  await page.waitForSelector(".editor-instance .monaco-editor textarea", { timeout: 20000 });
  await page.click(".editor-instance .monaco-editor .view-lines");
  await page.keyboard.down("Control");
  await page.keyboard.press("End");
  await page.keyboard.up("Control");

  if (!SCENARIOS[scenario]) throw new Error(`unknown scenario ${scenario}`);
  await SCENARIOS[scenario](page);
} catch (err) {
  result.error = String(err && err.stack ? err.stack : err);
  step("error", { error: String(err) });
  await shot(page, "error");
} finally {
  if (page) {
    result.finalLines = await editorLines(page).catch(() => null);
    result.finalGhost = await ghostText(page).catch(() => null);
  }
  if (browser) await browser.close().catch(() => {});
  if (!args.profile) fs.rmSync(profile, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(result) + "\n");
process.exit(result.ok ? 0 : 1);
