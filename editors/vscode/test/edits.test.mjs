// Unit tests of the next-edit logic (out/edits.js): reading copilotInlineEdit answers, the jump rule, labels.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readInlineEdit, needsJump, jumpLabel, insertLabel, endOfInserted } from "../out/edits.js";

const answer = (over = {}) => ({
  edits: [{
    text: "total",
    range: { start: { line: 7, character: 10 }, end: { line: 7, character: 15 } },
    textDocument: { uri: "file:///w/a.py", version: 4 },
    command: { title: "Accept next edit", command: "tabd.acceptInlineEdit", arguments: ["e1"] },
    ...over,
  }],
});

test("inline edit: Copilot's shape read as is (text, not newText)", () => {
  const edit = readInlineEdit(answer());
  assert.equal(edit.text, "total");
  assert.deepEqual(edit.range, { start: { line: 7, character: 10 }, end: { line: 7, character: 15 } });
  assert.equal(edit.uri, "file:///w/a.py");
  assert.equal(edit.version, 4);
  assert.equal(edit.command.command, "tabd.acceptInlineEdit");
  assert.deepEqual(edit.command.arguments, ["e1"]);
  assert.equal(edit.id, "e1");
  assert.equal(readInlineEdit(answer({ textDocument: { uri: "file:///w/a.py" } })).version, 0);
});

test("inline edit: none and malformed answers are no edit", () => {
  for (const bad of [null, undefined, {}, { edits: [] }, { edits: "x" }, answer({ text: 3 }), answer({ newText: "x", text: undefined }),
    answer({ range: { start: { line: -1, character: 0 }, end: { line: 0, character: 0 } } }),
    answer({ range: { start: { line: 3, character: 0 }, end: { line: 2, character: 0 } } }),
    answer({ textDocument: null }), answer({ command: { title: "x" } })]) {
    assert.equal(readInlineEdit(bad), undefined, JSON.stringify(bad));
  }
});

test("inline edit: a jump when it starts more than one line from the cursor", () => {
  const edit = readInlineEdit(answer());
  assert.equal(needsJump(edit, 7), false);
  assert.equal(needsJump(edit, 6), false);
  assert.equal(needsJump(edit, 8), false);
  assert.equal(needsJump(edit, 5), true);
  assert.equal(needsJump(edit, 20), true);
  assert.equal(jumpLabel(edit).trim(), "⇥ Tab: jump to line 8");
});

test("inline edit: labels and the cursor after applying", () => {
  assert.equal(insertLabel("a\n\tb"), "a⏎→b");
  assert.equal(insertLabel("x".repeat(200)).length, 120);
  const edit = readInlineEdit(answer());
  assert.deepEqual(endOfInserted(edit), { line: 7, character: 15 });
  assert.deepEqual(endOfInserted({ ...edit, text: "ab\ncde" }), { line: 8, character: 3 });
  assert.deepEqual(endOfInserted({ ...edit, text: "" }), { line: 7, character: 10 });
});
