// Every alert, workbook and runbook query reads only tables whose rows the
// repository's host.json keeps: the host's log levels let their records
// through and sampling leaves them whole (lib/telemetry.mjs). Mutations of
// host.json prove each rule fails.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import { allQueries } from './lib/queries.mjs';
import { tablesRead } from './lib/kql.mjs';
import { telemetryProblems, writes } from './lib/telemetry.mjs';

const hostJson = JSON.parse(readFileSync(path.join(repoRoot, 'host.json'), 'utf8'));
const queries = allQueries(await Project.load());
const problemsUnder = (h) => queries.flatMap(([where, q]) => telemetryProblems(h, tablesRead(q)).map((p) => `${where}: ${p}`));

test('every query reads tables that host.json keeps whole', () => {
  const read = new Set(queries.flatMap(([, q]) => tablesRead(q)));
  assert.ok(read.has('requests') && read.has('traces'), `the queries read ${[...read]}, want requests and traces among them`);
  assert.deepEqual(problemsUnder(hostJson), []);
});

test('the telemetry check fails when host.json drops or samples what a query reads', () => {
  const variant = (edit) => {
    const h = structuredClone(hostJson);
    edit(h);
    return problemsUnder(h).join('\n');
  };
  const cases = [
    [(h) => { h.logging.logLevel['Host.Results'] = 'Warning'; }, /alert order-status-failed-invocations: .*drops Host.Results/],
    [(h) => { h.logging.logLevel['Host.Function.Console'] = 'Warning'; }, /alert dead-letter-oldest-age: .*drops Host.Function.Console/],
    [(h) => { delete h.logging.logLevel['Host.Function.Console']; }, /drops Host.Function.Console/],
    [(h) => { h.logging.logLevel.Host = 'Error'; delete h.logging.logLevel['Host.Results']; }, /drops Host.Results/],
    [(h) => { h.logging.applicationInsights.samplingSettings.excludedTypes = 'Request;Exception'; }, /workbook handler-results: .*Trace is not in samplingSettings.excludedTypes/],
    [(h) => { delete h.logging.applicationInsights.samplingSettings; }, /Request is not in samplingSettings.excludedTypes/],
  ];
  for (const [edit, want] of cases) assert.match(variant(edit), want);
  assert.match(telemetryProblems(hostJson, ['dependencies']).join('\n'), /reads dependencies, but host.json turns enableDependencyTracking off/);
  assert.match(telemetryProblems(hostJson, ['pageViews']).join(), /no host.json rule/);
});

test('logLevel rules: the longest matching category prefix, else default, else Information', () => {
  const h = { logging: { logLevel: { default: 'Warning', Function: 'Warning', 'Function.OrderStatus.User': 'Information', 'host.results': 'Debug' } } };
  assert.equal(writes(h, 'Host.Results', 'Debug'), true);
  assert.equal(writes(h, 'Function.OrderStatus', 'Information'), false);
  assert.equal(writes(h, 'Function.OrderStatus.User', 'Information'), true);
  assert.equal(writes(h, 'Host.Function.Console', 'Information'), false);
  assert.equal(writes(h, 'Host.Function.Console', 'Error'), true);
  assert.equal(writes({}, 'Anything', 'Information'), true);
  assert.equal(writes({}, 'Anything', 'Debug'), false);
});
