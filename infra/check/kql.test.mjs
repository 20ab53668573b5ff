// Every KQL query the system runs or tells people to run, parsed and
// semantically analysed offline against the classic Application Insights
// schema (lib/kql.mjs): the log alerts' queries, the workbook's queries and
// the KQL blocks of the runbooks and alerts/README.md. Mutations prove a
// syntax error, an unknown table, column or function, and a string compared
// with a bool each fail.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import { logAlertQueries } from './lib/alert-rules.mjs';
import { allQueries } from './lib/queries.mjs';
import { kqlProblems } from './lib/kql.mjs';

const read = (rel) => readFileSync(path.join(repoRoot, rel), 'utf8');
const project = await Project.load();

test('every alert, workbook and runbook query parses and type-checks against the Application Insights schema', () => {
  const queries = allQueries(project);
  assert.ok(queries.filter(([w]) => w.startsWith('alert ')).length >= 3, 'found fewer than three log alert queries');
  assert.ok(queries.filter(([w]) => w.startsWith('workbook ')).length >= 5, 'found fewer than five workbook queries');
  assert.ok(queries.filter(([w]) => w.startsWith('alerts/runbooks/')).length >= 7, 'found fewer than seven runbook queries');
  const problems = queries.flatMap(([where, q]) => kqlProblems(q).map((p) => `${where}: ${p}`));
  assert.deepEqual(problems, []);
});

test('the KQL check fails on a syntax error, an unknown table, column or function, and a string compared with a bool', async () => {
  const age = logAlertQueries(project)['dead-letter-oldest-age'];
  const failed = logAlertQueries(project)['order-status-failed-invocations'];
  const cases = [
    [failed, '| where tobool(success) == false', '| where success == false', /type-mismatch success == false compares string with bool/],
    [failed, 'resultCode', 'resultcode', /KS142 The name 'resultcode' does not refer to any known column/],
    [age, 'customDimensions.run_id', 'customDimension.run_id', /The name 'customDimension' does not refer to any known/],
    [age, 'traces', 'trace', /KS204 The name 'trace' does not refer to any known table/],
    [age, 'parse_json(line)', 'parse_jsn(line)', /KS211 The name 'parse_jsn' does not refer to any known function/],
    [age, '| where depth > 0', '| where depth >', /KS006 Missing expression/],
    [age, 'by run_id, source, reason;', 'by run_id, source, reason', /\d+:\d+ KS\d+/],
  ];
  // The workspace-scoped alerts are analysed against the workspace's tables.
  const noExecutions = logAlertQueries(project)['order-status-no-executions'];
  cases.push(
    [noExecutions, '| where OperationName == "OrderStatus"', '| where operation_Name == "OrderStatus"', /KS142 The name 'operation_Name' does not refer to any known column/],
    [noExecutions, 'toscalar(AppRequests', 'toscalar(requests', /KS204 The name 'requests' does not refer to any known table/],
    [noExecutions, '// Log Analytics workspace: AzureMetrics, AppTraces and AppRequests', '// AzureMetrics', /KS204 The name 'AzureMetrics' does not refer to any known table/],
  );
  for (const [query, from, to, want] of cases) {
    assert.ok(query.includes(from), `query no longer contains ${JSON.stringify(from)}: update this case`);
    assert.match(kqlProblems(query.replace(from, to)).join('\n'), want, `for ${JSON.stringify(to)}`);
  }
  // The alert query inside alerts.bicep, misspelt there, fails through the same path.
  const source = read('alerts/alerts.bicep');
  const broken = await Project.load({ 'alerts/alerts.bicep': source.replace('| project timestamp, id, operation_Id, resultCode', '| project timestamp, id, operation_Id, resultCod') });
  assert.match(allQueries(broken).flatMap(([w, q]) => kqlProblems(q).map((p) => `${w}: ${p}`)).join('\n'),
    /alert order-status-failed-invocations: .*'resultCod' does not refer to any known column/);
});
