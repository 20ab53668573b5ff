// Keeps every `handler <group> <sub> --flag` command a runbook names in step
// with the CLI.
//
// Offline, always: each command is one the architecture defines
// (deadletters list|stats|sweep|replay|discard, publish
// status|timeout|cancel-timeout).
//
// Once the CLI exists (bin/handler is built and `bin/handler deadletters
// --help` exits 0): each sub-command appears in its group's help, and each
// flag in the help of its group or sub-command. Until then the test is
// skipped with the reason. `make test` builds bin/handler before these checks.

import test from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { readRunbooks, handlerInvocations } from './lib/runbooks.mjs';

const handlerBin = path.join(repoRoot, 'bin', 'handler');

/** The sub-commands ARCHITECTURE.md gives each CLI group. */
const KNOWN = {
  deadletters: ['list', 'stats', 'sweep', 'replay', 'discard'],
  publish: ['status', 'timeout', 'cancel-timeout'],
};

const sources = [
  ...readRunbooks(path.join(repoRoot, 'alerts/runbooks')).map((r) => ({ name: path.relative(repoRoot, r.file), text: r.text })),
  { name: 'alerts/README.md', text: readFileSync(path.join(repoRoot, 'alerts/README.md'), 'utf8') },
];
const invocations = sources.flatMap((s) => handlerInvocations(s.text).map((i) => ({ ...i, source: s.name })));

test('the parser finds handler commands however they are written', () => {
  const md = [
    'Text with handler deadletters stats outside a code block is ignored.',
    '```sh',
    'bin/handler deadletters sweep --dry-run',
    './bin/handler deadletters list --source=dlq --max 20   # a comment --ignored',
    'handler publish cancel-timeout --order-id o-1 | tee out.txt --not-a-flag',
    'bin/handler deadletters replay \\',
    '  --source dlq --message-id "o-1:2"',
    'echo "$(bin/handler deadletters stats)"',
    'azd env set X 1 && bin/handler deadletters discard --source poison',
    '```',
  ].join('\n');
  const got = handlerInvocations(md).map((i) => [i.group, i.sub, i.flags]);
  assert.deepEqual(got, [
    ['deadletters', 'sweep', ['--dry-run']],
    ['deadletters', 'list', ['--source', '--max']],
    ['publish', 'cancel-timeout', ['--order-id']],
    ['deadletters', 'replay', ['--source', '--message-id']],
    ['deadletters', 'stats', []],
    ['deadletters', 'discard', ['--source']],
  ]);
});

test('the runbooks name handler commands', () => {
  assert.ok(invocations.length > 0, 'no handler command found in the runbooks');
  assert.ok(invocations.some((i) => i.sub === 'sweep' && i.flags.includes('--dry-run')), 'no runbook runs deadletters sweep --dry-run');
});

test('every handler command in the runbooks is one the architecture defines', () => {
  for (const i of invocations) {
    assert.ok(i.group in KNOWN, `${i.source}: unknown group in "${i.command}"`);
    assert.ok(KNOWN[i.group].includes(i.sub), `${i.source}: unknown sub-command in "${i.command}"`);
  }
});

function help(bin, args) {
  const r = spawnSync(bin, [...args, '--help'], {
    encoding: 'utf8',
    timeout: 10_000,
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
  });
  return { status: r.status, text: `${r.stdout ?? ''}\n${r.stderr ?? ''}`, error: r.error };
}

/**
 * Checks the invocations against the help of the CLI at bin. Returns
 * {unavailable: reason} when there is no CLI to check yet, else {problems}.
 */
function checkCli(bin, list) {
  if (!existsSync(bin)) return { unavailable: `${path.relative(repoRoot, bin)} is not built (make build)` };
  const probe = help(bin, ['deadletters']);
  if (probe.error) return { unavailable: `handler deadletters --help did not run: ${probe.error.message}` };
  if (probe.status !== 0) {
    return { unavailable: `the handler deadletters CLI does not exist yet (handler deadletters --help exited ${probe.status})` };
  }
  const problems = [];
  const word = (text, w) => new RegExp(`(^|[^\\w-])${w.replace(/-/g, '\\-')}($|[^\\w-])`, 'm').test(text);
  const groups = new Map();
  for (const i of list) {
    if (!groups.has(i.group)) {
      const h = help(bin, [i.group]);
      if (h.status !== 0) problems.push(`handler ${i.group} --help exited ${h.status}`);
      groups.set(i.group, h.text);
    }
    const groupHelp = groups.get(i.group);
    if (!word(groupHelp, i.sub)) {
      problems.push(`${i.source}: "${i.command}": sub-command ${i.sub} is not in handler ${i.group} --help`);
    }
    const subHelp = help(bin, [i.group, i.sub]).text;
    for (const flag of i.flags) {
      const bare = flag.replace(/^--?/, '').replace(/-/g, '\\-');
      const re = new RegExp(`(^|[\\s,\\[])--?${bare}($|[\\s=,\\]])`, 'm');
      if (!re.test(groupHelp) && !re.test(subHelp)) {
        problems.push(`${i.source}: "${i.command}": flag ${flag} is in neither handler ${i.group} --help nor handler ${i.group} ${i.sub} --help`);
      }
    }
  }
  return { problems };
}

test('every handler sub-command and flag in the runbooks appears in the CLI help', (t) => {
  const result = checkCli(handlerBin, invocations);
  if (result.unavailable) {
    t.diagnostic(result.unavailable);
    t.skip(result.unavailable);
    return;
  }
  assert.deepEqual(result.problems, []);
});

// Fake CLIs (shell scripts in a temporary directory) prove the help check
// passes a complete CLI, fails an incomplete one and skips a missing one.
test('the CLI help check can pass, fail and skip', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'orderstatus-cli-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const fake = (name, body) => {
    const file = path.join(dir, name);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
    return file;
  };
  // Go's flag package prints flags with one dash: -dry-run.
  const usage = (flags) => `case "$1 $2" in
  "deadletters --help") echo "usage: handler deadletters list|stats|sweep|replay|discard"; exit 0;;
  "publish --help") echo "usage: handler publish status|timeout|cancel-timeout"; exit 0;;
  *) for f in ${flags}; do echo "  -$f string" >&2; done; exit 0;;
esac`;
  const all = 'dry-run source reason max message-id order-id status sequence';
  const complete = fake('complete', usage(all));
  const noMessageId = fake('no-message-id', usage(all.replace('message-id ', '')));
  const old = fake('old', 'echo "handler: unknown command" >&2; exit 2');

  const sample = handlerInvocations('```sh\nbin/handler deadletters replay --source dlq --message-id x\nbin/handler deadletters sweep --dry-run\nbin/handler publish status --order-id o-1\n```\n')
    .map((i) => ({ ...i, source: 'sample.md' }));
  assert.deepEqual(checkCli(complete, sample), { problems: [] });
  assert.deepEqual(checkCli(complete, invocations), { problems: [] }, 'the fake CLI must know every flag the runbooks use');
  const failing = checkCli(noMessageId, sample);
  assert.equal(failing.problems?.length, 1, JSON.stringify(failing));
  assert.match(failing.problems[0], /flag --message-id/);
  assert.match(checkCli(old, sample).unavailable, /does not exist yet .*exited 2/);
  assert.match(checkCli(path.join(dir, 'absent'), sample).unavailable, /is not built/);
  const unknownSub = handlerInvocations('```sh\nbin/handler deadletters purge\n```\n').map((i) => ({ ...i, source: 'x.md' }));
  assert.match(checkCli(complete, unknownSub).problems.join('\n'), /sub-command purge/);
});
