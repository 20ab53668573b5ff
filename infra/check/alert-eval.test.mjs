// The dead-letter count alerts (order-status-dead-lettered,
// order-status-poison-parked), run offline over the lines the sweeper
// really logs: alerts/testdata/deadletter-stats.json, written and checked
// by TestStatsLinesCountWhatEachRunDrained in handler/internal/deadletter.
// The sweeper drains a dead letter within one schedule period, so the
// alerts must fire on a run that stored a message even when nothing of it
// is left (a poison InvalidPayload, archived in the same run), and go quiet
// once a window holds only runs with nothing stored or open. Each line is
// fed twice, as the host writes it twice (stdout and the invocation's
// Logs). Mutations of the queries that lose a case must fail.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import { logAlertQueries } from './lib/alert-rules.mjs';
import { statsRows, compilePredicate } from './lib/stats-eval.mjs';

const project = await Project.load();
const queries = logAlertQueries(project);
const golden = JSON.parse(readFileSync(path.join(repoRoot, 'alerts/testdata/deadletter-stats.json'), 'utf8'));
const scenario = (prefix) => {
  const s = golden.find((g) => g.name.startsWith(prefix));
  assert.ok(s, `alerts/testdata/deadletter-stats.json has no scenario "${prefix}..."`);
  return s;
};

// [scenario, runs in the window, alert, fires]. Runs are five minutes
// apart; the alerts' window (15 minutes) holds up to three.
const DL = 'order-status-dead-lettered';
const PP = 'order-status-poison-parked';
const EXPECTED = [
  ['dead-lettered by the broker', [0], DL, true],
  ['dead-lettered by the broker', [1], DL, true], // still open in its cool-down
  ['dead-lettered by the broker', [0, 1], PP, false],
  ['parked InvalidPayload', [0], PP, true], // drained and archived in one run: only stored says so
  ['parked InvalidPayload', [0, 1], PP, true],
  ['parked InvalidPayload', [1], PP, false], // resolves once the window holds no such run
  ['parked InvalidPayload', [0, 1], DL, false],
  ['parked InvalidTransition', [1], PP, true], // left for a human: stays on
  ['parked InvalidTransition', [0, 1], DL, false],
  ['parked, then dead-lettered on the poison queue', [0], DL, true],
  ['parked, then dead-lettered on the poison queue', [1], DL, true],
  ['parked, then dead-lettered on the poison queue', [0, 1], PP, false],
];

function fires(query, s, runs) {
  const lines = runs.flatMap((r) => s.runs[r]).map((l) => JSON.parse(l));
  return statsRows(query, [...lines, ...lines]).length > 0;
}

function problems(qs) {
  const out = [];
  for (const [prefix, runs, alert, want] of EXPECTED) {
    const got = fires(qs[alert], scenario(prefix), runs);
    if (got !== want) out.push(`${alert} over "${prefix}" runs ${runs}: ${got ? 'fires' : 'silent'}, want ${want ? 'fires' : 'silent'}`);
  }
  return out;
}

test('the golden lines are the sweeper\'s: every scenario, two runs, the three sources each', () => {
  assert.equal(golden.length, 4);
  for (const s of golden) {
    assert.equal(s.runs.length, 2, s.name);
    for (const run of s.runs) {
      assert.deepEqual([...new Set(run.map((l) => JSON.parse(l).source))].sort(), ['dlq', 'poison', 'poison-dlq'], s.name);
    }
  }
});

test('the dead-letter count alerts fire on what a run drained, stay on while entries are open, and go quiet after', () => {
  assert.deepEqual(problems(queries), []);
});

test('a query that loses a case fails the evaluation', () => {
  const mutate = (alert, from, to) => {
    assert.ok(queries[alert].includes(from), `${alert} no longer contains ${JSON.stringify(from)}: update this case`);
    return { ...queries, [alert]: queries[alert].replace(from, to) };
  };
  const cases = [
    // Only what is still open: the archived InvalidPayload is never seen.
    [mutate(PP, '| where stored > 0 or depth > 0', '| where depth > 0'), /order-status-poison-parked over "parked InvalidPayload" runs 0: silent, want fires/],
    // Only what a run stored: an entry open for a second run is not seen.
    [mutate(DL, '| where stored > 0 or depth > 0', '| where stored > 0'), /order-status-dead-lettered over "dead-lettered by the broker" runs 1: silent, want fires/],
    // The poison queue's dead-letter queue forgotten.
    [mutate(DL, 'source in ("dlq", "poison-dlq")', 'source in ("dlq")'), /over "parked, then dead-lettered on the poison queue" runs 0: silent, want fires/],
    // Every line, empty sources included: never quiet.
    [mutate(PP, '| where stored > 0 or depth > 0', '| where depth >= 0'), /over "parked InvalidPayload" runs 1: fires, want silent/],
    // stored read from a field the line does not have.
    [mutate(PP, 'tolong(s.stored)', 'tolong(s.stored_count)'), /over "parked InvalidPayload" runs 0: silent, want fires/],
  ];
  for (const [qs, want] of cases) assert.match(problems(qs).join('\n'), want);
  assert.throws(() => statsRows(mutate(PP, '| where source == "poison"', '| where source has "poison"')[PP], []), /cannot read|not evaluated|want/);
});

test('the predicate evaluator follows KQL on and, or, in and null', () => {
  const row = { source: 'dlq', stored: 0, depth: 2, reason: null };
  assert.equal(compilePredicate('stored > 0 or depth > 0')(row), true);
  assert.equal(compilePredicate('stored > 0 and depth > 0')(row), false);
  assert.equal(compilePredicate('source in ("dlq", "poison-dlq")')(row), true);
  assert.equal(compilePredicate('source == "poison"')(row), false);
  assert.equal(compilePredicate('(source == "poison" or depth >= 2) and stored == 0')(row), true);
  assert.equal(compilePredicate('reason != "x"')(row), false, 'a comparison with null is false');
  assert.throws(() => compilePredicate('depth > '), /want more/);
});
