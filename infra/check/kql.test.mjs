// Every KQL query the system runs or tells people to run, parsed and
// semantically analysed offline against the classic Application Insights
// schema (lib/kql.mjs): the log alerts' queries, the workbook's queries and
// the KQL blocks of the runbooks and alerts/README.md. Mutations prove a
// syntax error, an unknown table, column or function, and a string compared
// with a bool each fail; the retired AzureMetrics alerts' queries
// (alerts/testdata) prove a query over a metric diagnostic settings do not
// export fails.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import { alertRules, logAlertQueries } from './lib/alert-rules.mjs';
import { allQueries } from './lib/queries.mjs';
import { kqlProblems, azureMetricsProblems, metricNamesNamed, EXPORTABLE_METRICS } from './lib/kql.mjs';
import { diagnosticMetricCategories } from './lib/infra-rules.mjs';
import { codeBlocks } from './lib/runbooks.mjs';

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

// The two log alerts retired in issue 30 read AzureMetrics for
// ScheduledMessages and ActiveMessages, which diagnostic settings never
// export: valid KQL that can never return a row.
const retired = {
  'scheduled-surge': read('alerts/testdata/azuremetrics-scheduled-surge.kql'),
  'no-executions': read('alerts/testdata/azuremetrics-no-executions.kql'),
};
const enabled = diagnosticMetricCategories(project);

test('a query over AzureMetrics names only metrics diagnostic settings export, in alerts, workbook and runbooks alike', () => {
  assert.deepEqual(enabled['Microsoft.ServiceBus/namespaces'], ['AllMetrics'], 'the namespace\'s diagnostic setting');
  const problems = allQueries(project).flatMap(([where, q]) => azureMetricsProblems(q, { enabled }).map((p) => `${where}: ${p}`));
  assert.deepEqual(problems, []);
});

test('the AzureMetrics check fails on the retired alerts\' queries and on every other way to read a metric that is not there', () => {
  // The retired queries parse and type-check: only the new rule catches them.
  for (const [name, q] of Object.entries(retired)) assert.deepEqual(kqlProblems(q), [], `${name} fixture`);
  assert.match(azureMetricsProblems(retired['scheduled-surge'], { enabled }).join('\n'),
    /MetricName "ScheduledMessages" never has rows: Microsoft\.ServiceBus\/namespaces does not export it .*DS Export: No; MicrosoftDocs\/azure-reference-other/);
  assert.match(azureMetricsProblems(retired['no-executions'], { enabled }).join('\n'), /MetricName "ActiveMessages" never has rows/);

  const over = (where) => `// Log Analytics workspace: AzureMetrics\nAzureMetrics\n| where ResourceProvider == "MICROSOFT.SERVICEBUS"${where}\n| summarize sum(Total)`;
  // An exported counter passes; its name in a comment does not count for one.
  assert.deepEqual(azureMetricsProblems(over(' and MetricName == "CompleteMessage"'), { enabled }), []);
  assert.deepEqual(azureMetricsProblems(over(' and MetricName in ("IncomingMessages", "OutgoingMessages")'), { enabled }), []);
  assert.match(azureMetricsProblems(over(' // MetricName == "CompleteMessage"'), { enabled }).join('\n'), /names no metric/);
  assert.match(azureMetricsProblems(over(' and MetricName in ("CompleteMessage", "DeadletteredMessages")'), { enabled }).join('\n'), /"DeadletteredMessages" never has rows/);
  assert.match(azureMetricsProblems(over(' and MetricName == "Completed"'), { enabled }).join('\n'), /"Completed" is not in infra\/check\/lib\/exportable-metrics\.json/);
  // A storage metric exported in a category the diagnostic settings leave off.
  const capacity = '// Log Analytics workspace: AzureMetrics\nAzureMetrics\n| where ResourceProvider == "MICROSOFT.STORAGE" and MetricName == "TableCapacity"';
  assert.match(azureMetricsProblems(capacity, { enabled }).join('\n'), /TableCapacity.*category Capacity, which this project's diagnostic setting does not enable/);
  assert.deepEqual(azureMetricsProblems(capacity.replace('TableCapacity', 'Transactions'), { enabled }), []);
  // The rule reaches runbook KQL through the same path as alert KQL.
  const book = read('alerts/runbooks/order-status-scheduled-surge.md') + '\n```kql\n' + retired['scheduled-surge'] + '```\n';
  const blocks = codeBlocks(book).filter((b) => b.lang === 'kql');
  assert.match(blocks.flatMap((b) => azureMetricsProblems(b.code, { enabled })).join('\n'), /"ScheduledMessages" never has rows/);
});

test('exportable-metrics.json: each metric once per resource type, with its source, covering every Service Bus metric an alert watches', () => {
  for (const [type, t] of Object.entries(EXPORTABLE_METRICS.resourceTypes)) {
    assert.match(t.source, /^MicrosoftDocs\/azure-reference-other, azure-monitor-ref\/supported-metrics\/includes\/.+-metrics-include\.md/, `${type} source`);
    const all = [...Object.values(t.exported).flat(), ...t.notExported];
    assert.deepEqual(all.filter((m, i) => all.indexOf(m) !== i), [], `${type} lists a metric twice`);
  }
  const sb = EXPORTABLE_METRICS.resourceTypes['Microsoft.ServiceBus/namespaces'];
  const known = new Set([...Object.values(sb.exported).flat(), ...sb.notExported]);
  const watched = alertRules(project).filter((r) => r.kind === 'metric')
    .flatMap((r) => r.body.properties.criteria.allOf).filter((c) => c.metricNamespace === 'Microsoft.ServiceBus/namespaces').map((c) => c.metricName);
  assert.ok(watched.includes('ScheduledMessages') && watched.includes('OutgoingMessages'), `watched: ${watched}`);
  assert.deepEqual(watched.filter((m) => !known.has(m)), [], 'Service Bus metrics the alerts watch that the list does not classify');
  assert.deepEqual(metricNamesNamed('AzureMetrics | where MetricName =~ "a" or MetricName in (\'b\', "c")'), ['a', 'b', 'c']);
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
  // A query for the Log Analytics workspace is analysed against the
  // workspace's tables (the retired alert's query, kept as a fixture).
  const noExecutions = retired['no-executions'];
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
