// The terse reporter `make test` uses for these checks names each failure
// and closes with the counts; run here over a throw-away test file.

import test from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const reporter = path.join(path.dirname(fileURLToPath(import.meta.url)), 'lib', 'terse-reporter.mjs');

test('the terse reporter names failures and counts leaf tests', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'terse-reporter-'));
  try {
    writeFileSync(path.join(dir, 'sample.test.mjs'), [
      "import test from 'node:test';",
      "import assert from 'node:assert/strict';",
      "test('passes', () => {});",
      "test('fails', () => { assert.equal(1, 2); });",
      "test('parent', async (t) => {",
      "  await t.test('child passes', () => {});",
      "  await t.test('child fails', () => { assert.ok(false, 'the child broke'); });",
      '});',
      "test('skipped', { skip: 'later' }, () => {});",
    ].join('\n'));
    writeFileSync(path.join(dir, 'broken.test.mjs'), "import './missing.mjs';\n");
    // A test runner of its own, not a child of this one.
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const run = spawnSync(process.execPath, ['--test', `--test-reporter=${reporter}`, dir], { encoding: 'utf8', env });
    assert.equal(run.status, 1, `exit status; output:\n${run.stdout}${run.stderr}`);
    const out = run.stdout;
    assert.match(out, /^not ok: fails \(.*sample\.test\.mjs:4\)\n.*1 !== 2/ms);
    assert.match(out, /^not ok: parent > child fails .*\n.*the child broke/m);
    assert.match(out, /^not ok: .*broken\.test\.mjs.*\n(.*\n)*.*Cannot find module/m);
    assert.doesNotMatch(out, /passes|^ok /m, 'passing tests print nothing');
    assert.match(out, /\ninfra: 2 passed, 3 failed, 1 skipped\n$/, `closing line; output:\n${out}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
