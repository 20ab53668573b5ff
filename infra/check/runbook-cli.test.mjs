// Keeps every `handler <group> <sub> --flag` command a runbook names in step
// with the CLI.
//
// Offline, always: each command is one the dead-letter store's CLI defines
// (issue 16: deadletters stats|groups|find|list|replay|discard|archive|
// restore|sweep; publish status|timeout|cancel-timeout), each flag one its
// sub-command takes, and each command line usable as written: find needs
// --order, restore and --body need --id, --id excludes a filter, and an
// action on a filter that is not a --dry-run carries --yes (it may select
// more than one entry, and off a terminal the CLI refuses it without).
//
// Once the CLI is built (bin/orderstatus exists and `bin/orderstatus deadletters
// --help` exits 0): each sub-command appears in its group's help, and each
// flag in the help of its group or sub-command. Until then that test is
// skipped with the reason. `make test` builds bin/orderstatus before these checks.

import test from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { readRunbooks, handlerInvocations } from './lib/runbooks.mjs';

const handlerBin = path.join(repoRoot, 'bin', 'orderstatus');

/** The filter flags of the deadletters commands that select entries. */
const FILTER = ['--source', '--reason', '--group', '--order', '--since', '--until', '--text', '--state'];

/**
 * The sub-commands of each CLI group and the flags each takes (--help and
 * --json are everywhere): the dead-letter CLI as issue 16 defines it, and
 * publish as ARCHITECTURE.md does.
 */
const KNOWN = {
  deadletters: {
    stats: [],
    groups: FILTER,
    find: ['--order'],
    list: [...FILTER, '--max'],
    replay: ['--id', '--body', ...FILTER, '--dry-run', '--yes'],
    discard: ['--id', ...FILTER, '--dry-run', '--yes'],
    archive: ['--id', ...FILTER, '--dry-run', '--yes'],
    restore: ['--id'],
    sweep: ['--dry-run'],
  },
  publish: {
    status: ['--order-id', '--status', '--sequence'],
    timeout: ['--order-id'],
    'cancel-timeout': ['--order-id'],
  },
};
const EVERYWHERE = ['--help', '--json'];
const ACTIONS = ['replay', 'discard', 'archive'];

/** Problems of one invocation against KNOWN and the CLI's usage rules. */
export function usageProblems(i) {
  const where = `${i.source}: "${i.command}"`;
  const subs = KNOWN[i.group];
  if (!subs) return [`${where}: unknown group ${i.group}`];
  const takes = subs[i.sub];
  if (!takes) return [`${where}: unknown sub-command ${i.sub} (want one of ${Object.keys(subs).join(', ')})`];
  const problems = [];
  for (const f of i.flags) {
    if (!takes.includes(f) && !EVERYWHERE.includes(f)) problems.push(`${where}: ${i.group} ${i.sub} takes no ${f}`);
  }
  if (i.group !== 'deadletters') return problems;
  const has = (f) => i.flags.includes(f);
  const filtered = i.flags.some((f) => FILTER.includes(f));
  if (i.sub === 'find' && !has('--order')) problems.push(`${where}: find needs --order`);
  if (i.sub === 'restore' && !has('--id')) problems.push(`${where}: restore needs --id`);
  if (has('--body') && !has('--id')) problems.push(`${where}: --body needs --id`);
  if (ACTIONS.includes(i.sub)) {
    if (has('--id') && filtered) problems.push(`${where}: --id and a filter exclude each other`);
    if (!has('--id') && !filtered) problems.push(`${where}: ${i.sub} needs --id or a filter`);
    if (filtered && !has('--dry-run') && !has('--yes')) {
      problems.push(`${where}: ${i.sub} on a filter may select more than one entry: add --yes (or --dry-run)`);
    }
  }
  return problems;
}

const sources = [
  ...readRunbooks(path.join(repoRoot, 'alerts/runbooks')).map((r) => ({ name: path.relative(repoRoot, r.file), text: r.text })),
  { name: 'alerts/README.md', text: readFileSync(path.join(repoRoot, 'alerts/README.md'), 'utf8') },
];
const invocations = sources.flatMap((s) => handlerInvocations(s.text).map((i) => ({ ...i, source: s.name })));

test('the parser finds handler commands however they are written', () => {
  const md = [
    'Text with orderstatus deadletters stats outside a code block is ignored.',
    '```sh',
    'bin/orderstatus deadletters sweep --dry-run',
    './bin/orderstatus deadletters list --source=dlq --max 20   # a comment --ignored',
    'orderstatus publish cancel-timeout --order-id o-1 | tee out.txt --not-a-flag',
    'bin/orderstatus deadletters replay \\',
    '  --source dlq --reason MaxDeliveryCountExceeded --yes',
    'echo "$(bin/orderstatus deadletters stats)"',
    'azd env set X 1 && bin/orderstatus deadletters discard --source poison',
    'bin/orderstatus deadletters find --order "<order id>" --json > order.jsonl',
    '```',
  ].join('\n');
  const got = handlerInvocations(md).map((i) => [i.group, i.sub, i.flags]);
  assert.deepEqual(got, [
    ['deadletters', 'sweep', ['--dry-run']],
    ['deadletters', 'list', ['--source', '--max']],
    ['publish', 'cancel-timeout', ['--order-id']],
    ['deadletters', 'replay', ['--source', '--reason', '--yes']],
    ['deadletters', 'stats', []],
    ['deadletters', 'discard', ['--source']],
    ['deadletters', 'find', ['--order', '--json']],
  ]);
});

test('the runbooks name the dead-letter commands of the store', () => {
  assert.ok(invocations.length > 0, 'no handler command found in the runbooks');
  const used = new Set(invocations.map((i) => `${i.group} ${i.sub}`));
  for (const sub of Object.keys(KNOWN.deadletters)) assert.ok(used.has(`deadletters ${sub}`), `no runbook runs orderstatus deadletters ${sub}`);
  assert.ok(invocations.some((i) => ACTIONS.includes(i.sub) && i.flags.includes('--dry-run') && !i.flags.includes('--id')),
    'no runbook runs a bulk action as a --dry-run');
});

test('every handler command in the runbooks is one the CLI defines, with flags it takes, usable as written', () => {
  assert.deepEqual(invocations.flatMap(usageProblems), []);
});

test('the usage check can fail', () => {
  const cases = [
    ['bin/orderstatus deadletters replay --source dlq --message-id x', /replay takes no --message-id/],
    ['bin/orderstatus deadletters purge --state archived', /unknown sub-command purge/],
    ['bin/orderstatus deadletters find "<order id>"', /find needs --order/],
    ['bin/orderstatus deadletters restore --group g', /restore takes no --group.*\n.*restore needs --id/],
    ['bin/orderstatus deadletters replay --source dlq --body fixed.json', /--body needs --id/],
    ['bin/orderstatus deadletters discard --id x --source poison', /--id and a filter exclude each other/],
    ['bin/orderstatus deadletters archive', /archive needs --id or a filter/],
    ['bin/orderstatus deadletters discard --source poison --reason InvalidTransition', /may select more than one entry: add --yes/],
    ['bin/orderstatus deadletters stats --max 3', /stats takes no --max/],
  ];
  for (const [line, want] of cases) {
    const [i] = handlerInvocations('```sh\n' + line + '\n```\n').map((x) => ({ ...x, source: 'x.md' }));
    assert.match(usageProblems(i).join('\n'), want, line);
  }
  for (const line of ['bin/orderstatus deadletters discard --source poison --state left --yes', 'bin/orderstatus deadletters replay --id x --body f.json',
    'bin/orderstatus deadletters archive --group g --dry-run', 'bin/orderstatus deadletters find --order o-1 --json']) {
    const [i] = handlerInvocations('```sh\n' + line + '\n```\n').map((x) => ({ ...x, source: 'x.md' }));
    assert.deepEqual(usageProblems(i), [], line);
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
  if (probe.error) return { unavailable: `orderstatus deadletters --help did not run: ${probe.error.message}` };
  if (probe.status !== 0) {
    return { unavailable: `the orderstatus deadletters CLI does not exist yet (orderstatus deadletters --help exited ${probe.status})` };
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
  "deadletters --help") echo "usage: orderstatus deadletters stats|groups|find|list|replay|discard|archive|restore|sweep"; exit 0;;
  "publish --help") echo "usage: orderstatus publish status|timeout|cancel-timeout"; exit 0;;
  *) for f in ${flags}; do echo "  -$f string" >&2; done; exit 0;;
esac`;
  const all = 'dry-run yes json id body source reason group order since until text state max order-id status sequence';
  const complete = fake('complete', usage(all));
  const noGroup = fake('no-group', usage(all.replace('group ', '')));
  const old = fake('old', 'echo "handler: unknown command" >&2; exit 2');

  const sample = handlerInvocations('```sh\nbin/orderstatus deadletters replay --group g --state open --dry-run\nbin/orderstatus deadletters sweep --dry-run\nbin/orderstatus publish status --order-id o-1\n```\n')
    .map((i) => ({ ...i, source: 'sample.md' }));
  assert.deepEqual(checkCli(complete, sample), { problems: [] });
  assert.deepEqual(checkCli(complete, invocations), { problems: [] }, 'the fake CLI must know every flag the runbooks use');
  const failing = checkCli(noGroup, sample);
  assert.equal(failing.problems?.length, 1, JSON.stringify(failing));
  assert.match(failing.problems[0], /flag --group/);
  assert.match(checkCli(old, sample).unavailable, /does not exist yet .*exited 2/);
  assert.match(checkCli(path.join(dir, 'absent'), sample).unavailable, /is not built/);
  const unknownSub = handlerInvocations('```sh\nbin/orderstatus deadletters purge\n```\n').map((i) => ({ ...i, source: 'x.md' }));
  assert.match(checkCli(complete, unknownSub).problems.join('\n'), /sub-command purge/);
});
