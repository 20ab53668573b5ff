// Invariants of alerts/: the alert set and what each alert watches, the
// runbook link on every alert, one runbook per alert and one alert per
// runbook, the runbooks' shape, and the workbook.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import { alertRules, checkAlerts, checkWorkbook, logAlertQueries, EXPECTED_ALERTS } from './lib/alert-rules.mjs';
import { readRunbooks, parseRunbook, handlerInvocations, squashWhitespace, codeBlocks, RUNBOOK_SECTIONS } from './lib/runbooks.mjs';

const read = (rel) => readFileSync(path.join(repoRoot, rel), 'utf8');
const runbookDir = path.join(repoRoot, 'alerts/runbooks');
const project = await Project.load();
const runbooks = readRunbooks(runbookDir);

// Runbooks whose first mitigation step is the sweeper policy in dry-run mode.
const DEAD_LETTER_RUNBOOKS = ['order-status-dead-lettered', 'order-status-poison-parked', 'dead-letter-oldest-age'];

test('the alerts the issue asks for exist, each watching the right signal and carrying its runbook link', () => {
  assert.deepEqual(checkAlerts(project), []);
});

test('every alert has a runbook file, and every runbook an alert', () => {
  const alerts = alertRules(project).map((r) => r.name).sort();
  const books = runbooks.map((r) => r.name).sort();
  for (const name of alerts) {
    assert.ok(existsSync(path.join(runbookDir, `${name}.md`)), `alert ${name} has no alerts/runbooks/${name}.md`);
  }
  for (const name of books) {
    assert.ok(alerts.includes(name), `alerts/runbooks/${name}.md has no alert named ${name}`);
  }
  assert.deepEqual(books, alerts);
});

test('the runbook base URL defaults to the repository pattern and is overridable', () => {
  const main = project.get('infra/main.bicep');
  assert.match(main.variable('defaultRunbookBaseUrl'), /^https:\/\/.+\/alerts\/runbooks$/);
  const arg = main.module('alerts').body.params.runbookBaseUrl;
  assert.equal(arg.text.replace(/\s+/g, ''), 'empty(runbookBaseUrl)?defaultRunbookBaseUrl:runbookBaseUrl');
  assert.equal(main.paramDefault('runbookBaseUrl'), '');
});

for (const book of runbooks) {
  test(`runbook ${book.name}: title, sections in order, commands`, () => {
    assert.equal(book.title, book.name, `${book.name}.md: title "${book.title}", want "# ${book.name}"`);
    assert.deepEqual(book.order.filter((h) => RUNBOOK_SECTIONS.includes(h)), RUNBOOK_SECTIONS,
      `${book.name}.md sections ${JSON.stringify(book.order)}`);
    for (const section of RUNBOOK_SECTIONS) {
      assert.ok(book.sections.get(section).text.trim().length > 0, `${book.name}.md: ## ${section} is empty`);
    }
    const diagnosis = book.sections.get('Diagnosis');
    const code = diagnosis.codeBlocks.map((b) => b.code).join('\n');
    assert.match(code, /(^|\s)az\s/m, `${book.name}.md: Diagnosis has no az command`);
    assert.ok(diagnosis.codeBlocks.some((b) => b.lang === 'kql'), `${book.name}.md: Diagnosis has no KQL`);
    assert.ok(book.codeBlocks.every((b) => !b.unterminated), `${book.name}.md has an unterminated code block`);
    // Where a runbook uses the handler CLI, it also says what to do without it.
    for (const section of ['Diagnosis', 'Mitigation']) {
      const s = book.sections.get(section);
      if (handlerInvocations(s.text).length > 0) {
        assert.match(s.text, /Until the CLI exists/, `${book.name}.md: ## ${section} uses bin/handler without an az or portal equivalent`);
      }
    }
  });
}

for (const name of DEAD_LETTER_RUNBOOKS) {
  test(`runbook ${name}: mitigation starts with handler deadletters sweep --dry-run`, () => {
    const book = runbooks.find((b) => b.name === name);
    assert.ok(book, `no runbook ${name}`);
    const first = handlerInvocations(book.sections.get('Mitigation').text)[0];
    assert.ok(first, `${name}.md: Mitigation names no handler command`);
    assert.deepEqual([first.group, first.sub, first.flags], ['deadletters', 'sweep', ['--dry-run']], `first command: ${first.command}`);
    const firstBlock = book.sections.get('Mitigation').codeBlocks[0].code.trim().split('\n')[0];
    assert.match(firstBlock, /handler deadletters sweep --dry-run$/);
  });
}

// The host's writes to its diagnostic-events tables are refused by design
// (Table Data Contributor is scoped to our tables; docs/deploy.md, "Identity
// and roles"); error-log queries leave those lines out.
const DIAGNOSTIC_EVENTS_FILTER = 'where message !contains "diagnostic event" and message !has "table reference"';

/**
 * Problems with the az commands and KQL in one Markdown text, each a known
 * way to get an empty or wrong answer:
 *  - a KQL block filtering severityLevel >= 3 without DIAGNOSTIC_EVENTS_FILTER;
 *  - az storage entity query printed as a table without --query items (the
 *    command returns {items, nextMarker}, which -o table cannot show);
 *  - az functionapp show --query reaching into properties. (the CLI flattens
 *    properties, so the path is null);
 *  - --maximum-instance-count outside 40..1000, what Flex Consumption accepts
 *    in most regions;
 *  - az monitor app-insights query with --app instead of --apps.
 */
function commandProblems(name, text) {
  const problems = [];
  for (const block of codeBlocks(text)) {
    const code = block.code.replace(/\\\n/g, ' ');
    if (block.lang === 'kql' && /severityLevel\s*>=\s*3/.test(code) && !code.includes(DIAGNOSTIC_EVENTS_FILTER)) {
      problems.push(`${name}:${block.line}: error-log query without | ${DIAGNOSTIC_EVENTS_FILTER}`);
    }
    for (const line of code.split('\n')) {
      if (/\baz storage entity query\b/.test(line) && /-o table/.test(line) && !/--query items\b/.test(line)) {
        problems.push(`${name}:${block.line}: az storage entity query -o table needs --query items`);
      }
      if (/\baz functionapp show\b/.test(line) && /--query\s+\S*\bproperties\./.test(line)) {
        problems.push(`${name}:${block.line}: az functionapp show flattens properties; query functionAppConfig... directly`);
      }
      for (const [, n] of line.matchAll(/--maximum-instance-count\s+(\d+)/g)) {
        if (Number(n) < 40 || Number(n) > 1000) problems.push(`${name}:${block.line}: --maximum-instance-count ${n}: Flex Consumption accepts 40 to 1000`);
      }
      if (/\baz monitor app-insights query\b/.test(line) && /\s--app\s/.test(line)) {
        problems.push(`${name}:${block.line}: az monitor app-insights query takes --apps`);
      }
    }
  }
  return problems;
}

test('the az commands and error-log queries in the runbooks avoid the known empty-answer traps', () => {
  const texts = [...runbooks.map((b) => [`${b.name}.md`, b.text]), ['alerts/README.md', read('alerts/README.md')]];
  for (const [name, text] of texts) assert.deepEqual(commandProblems(name, text), []);

  const failed = runbooks.find((b) => b.name === 'order-status-failed-invocations').text;
  const throttled = runbooks.find((b) => b.name === 'service-bus-throttled-requests').text;
  const cases = [
    [failed, `   | ${DIAGNOSTIC_EVENTS_FILTER}\n`, '', /error-log query without/],
    [throttled, '--num-results 50 --query items -o table', '--num-results 50 -o table', /needs --query items/],
    [throttled, '--query "{state: state, scale: functionAppConfig.scaleAndConcurrency}"', '--query properties.functionAppConfig.scaleAndConcurrency', /flattens properties/],
    [throttled, '--maximum-instance-count 40', '--maximum-instance-count 20', /--maximum-instance-count 20: Flex Consumption accepts 40 to 1000/],
    [read('alerts/README.md'), 'query --apps "$APPI"', 'query --app "$APPI"', /takes --apps/],
  ];
  for (const [text, from, to, want] of cases) {
    assert.ok(text.includes(from), `no longer contains ${JSON.stringify(from)}: update this case`);
    assert.match(commandProblems('x.md', text.replace(from, to)).join('\n'), want);
  }
});

test('each log alert query appears verbatim in its runbook', () => {
  const queries = logAlertQueries(project);
  assert.deepEqual(Object.keys(queries).sort(), Object.entries(EXPECTED_ALERTS).filter(([, s]) => s.kind === 'log').map(([n]) => n).sort());
  for (const [name, query] of Object.entries(queries)) {
    const book = runbooks.find((b) => b.name === name);
    const blocks = book.codeBlocks.filter((b) => b.lang === 'kql').map((b) => squashWhitespace(b.code));
    assert.ok(blocks.includes(squashWhitespace(query)), `${name}.md has no KQL block equal to the alert's query:\n${query}`);
  }
});

test('the runbook checks can fail', async () => {
  const broken = parseRunbook('# x\n\n## Meaning\n\ntext\n\n## Diagnosis\n\n```sh\nls\n```\n');
  assert.notDeepEqual(broken.order.filter((h) => RUNBOOK_SECTIONS.includes(h)), RUNBOOK_SECTIONS);

  const source = read('alerts/alerts.bicep');
  const cases = [
    ["runbook: '${runbookBaseUrl}/${alert.name}.md'\n        }", "runbook: '${runbookBaseUrl}/${alert.metricName}.md'\n        }", /webHookProperties\.runbook/],
    ["Runbook: ${runbookBaseUrl}/order-status-failed-invocations.md'", "'", /description/],
    ["runbook: '${runbookBaseUrl}/dead-letter-oldest-age.md'", "runbook: '${runbookBaseUrl}/index.md'", /customProperties\.runbook/],
    ["name: 'order-status-backlog'", "name: 'order-status-queue-depth'", /alerts: got/],
    ["metricName: 'ThrottledRequests'", "metricName: 'UserErrors'", /metricName UserErrors/],
    ["| where tobool(success) == false\n| project", "| where success == false\n| project", /query must contain tobool\(success\) == false/],
    // The heartbeat (issue 7): fires on the absence of lines, over three schedule periods.
    ["operator: 'LessThan'\n          threshold: 1", "operator: 'GreaterThan'\n          threshold: 1", /dead-letter-sweeper-heartbeat: operator GreaterThan, want LessThan/],
    ["operator: 'LessThan'\n          threshold: 1", "operator: 'LessThan'\n          threshold: 0", /dead-letter-sweeper-heartbeat: threshold 0, want 1/],
    ["description: 'No deadletter_stats line from the DeadLetterSweeper for 15 minutes (three schedule periods): the sweeper is not running, failing before it measures, or its logs do not arrive. Dead letters are neither replayed nor measured, and the age alert cannot fire. Runbook: ${runbookBaseUrl}/dead-letter-sweeper-heartbeat.md'\n    severity: 2\n    enabled: true\n    scopes: [\n      appInsights.id\n    ]\n    evaluationFrequency: 'PT5M'\n    windowSize: 'PT15M'", "description: 'No deadletter_stats line from the DeadLetterSweeper for 15 minutes (three schedule periods): the sweeper is not running, failing before it measures, or its logs do not arrive. Dead letters are neither replayed nor measured, and the age alert cannot fire. Runbook: ${runbookBaseUrl}/dead-letter-sweeper-heartbeat.md'\n    severity: 2\n    enabled: true\n    scopes: [\n      appInsights.id\n    ]\n    evaluationFrequency: 'PT5M'\n    windowSize: 'PT5M'", /dead-letter-sweeper-heartbeat: windowSize PT5M, want PT15M/],
    // The age query counts each copy of a line once, per run.
    ["by run_id, source, reason;", "by source, reason;", /dead-letter-oldest-age: query must contain by run_id, source, reason/],
    ["metricMeasureColumn: 'oldest_age_seconds'", "metricMeasureColumn: 'depth'", /metricMeasureColumn/],
    ["threshold: backlogThreshold", "threshold: 1000", /threshold 1000, want the parameter backlogThreshold/],
    // Metric alert shape.
    ["resource metricAlertRules 'Microsoft.Insights/metricAlerts@2018-03-01' = [for alert in metricAlerts: {\n  name: alert.name\n  location: 'global'", "resource metricAlertRules 'Microsoft.Insights/metricAlerts@2018-03-01' = [for alert in metricAlerts: {\n  name: alert.name\n  location: location", /order-status-backlog: location .*location.*, want global/],
    ["'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'", "'odata.type': 'Microsoft.Azure.Monitor.MultipleResourceMultipleMetricCriteria'", /criteria odata\.type/],
    ["criterionType: 'StaticThresholdCriterion'", "criterionType: 'DynamicThresholdCriterion'", /criterionType DynamicThresholdCriterion/],
    ["threshold: 0\n    timeAggregation: 'Total'\n    windowSize: 'PT5M'\n  }\n  {\n    name: 'service-bus-throttled-requests'", "threshold: 0\n    timeAggregation: 'Average'\n    windowSize: 'PT5M'\n  }\n  {\n    name: 'service-bus-throttled-requests'", /service-bus-server-errors: timeAggregation Average for ServerErrors, want one of Total/],
    ["threshold: 0\n    timeAggregation: 'Maximum'\n    windowSize: 'PT5M'\n  }\n  {\n    name: 'order-status-poison-parked'", "threshold: 0\n    timeAggregation: 'Total'\n    windowSize: 'PT5M'\n  }\n  {\n    name: 'order-status-poison-parked'", /order-status-dead-lettered: timeAggregation Total for DeadletteredMessages/],
    ["evaluationFrequency: 'PT1M'\n    windowSize: 'PT5M'", "evaluationFrequency: 'PT15M'\n    windowSize: 'PT5M'", /evaluationFrequency PT15M is longer than windowSize PT5M/],
    // Log alert shape.
    ["name: 'order-status-failed-invocations'\n  location: location\n  tags: tags\n  kind: 'LogAlert'", "name: 'order-status-failed-invocations'\n  location: location\n  tags: tags\n  kind: 'SimpleLogAlert'", /kind SimpleLogAlert, want LogAlert/],
    ["timeAggregation: 'Count'", "timeAggregation: 'Sum'", /timeAggregation Sum, want one of Count/],
    ["timeAggregation: 'Maximum'\n          metricMeasureColumn", "timeAggregation: 'Average'\n          metricMeasureColumn", /dead-letter-oldest-age: timeAggregation Average, want Maximum/],
    ["timeAggregation: 'Count'", "timeAggregation: 'Count'\n          metricMeasureColumn: null", /must not set it \(not even to null\)/],
    // Issue 18.4: the baseline alerts that were missing, each with a mutation that must fail.
    ["metricName: 'UserErrors'", "metricName: 'ServerErrors'", /service-bus-user-errors: metricName ServerErrors, want UserErrors/],
    ["threshold: userErrorsThreshold", "threshold: 0", /service-bus-user-errors: threshold 0, want the parameter userErrorsThreshold/],
    ["threshold: abandonedThreshold\n    timeAggregation: 'Total'\n    windowSize: 'PT15M'", "threshold: abandonedThreshold\n    timeAggregation: 'Total'\n    windowSize: 'PT5M'", /order-status-abandoned: windowSize PT5M, want PT15M/],
    ["metricName: 'AbandonMessage'\n    dimensions: [\n      {\n        name: 'EntityName'\n        operator: 'Include'\n        values: [\n          orderStatusQueueName", "metricName: 'AbandonMessage'\n    dimensions: [\n      {\n        name: 'EntityName'\n        operator: 'Include'\n        values: [\n          poisonQueueName", /order-status-abandoned: EntityName values .* must include order-status/],
    ["operator: 'LessThanOrEqual'", "operator: 'GreaterThan'", /order-status-stalled-consumer: criterion 1 \(OutgoingMessages\): operator GreaterThan, want LessThanOrEqual/],
    ["timeAggregation: 'Minimum'", "timeAggregation: 'Maximum'", /order-status-stalled-consumer: criterion 2 \(ActiveMessages\): timeAggregation Maximum, want Minimum/],
    ["windowSize: 'PT10M'", "windowSize: 'PT5M'", /order-status-stalled-consumer: windowSize PT5M, want PT10M/],
    ["          timeAggregation: 'Minimum'\n        }\n", "          timeAggregation: 'Minimum'\n        }\n        {\n          criterionType: 'StaticThresholdCriterion'\n        }\n", /order-status-stalled-consumer: want exactly 2 criteria/],
    ["operator: 'LessThan'\n    threshold: 100", "operator: 'GreaterThan'\n    threshold: 100", /storage-availability: operator GreaterThan, want LessThan/],
    ["      storageAccount.id\n    ]\n    evaluationFrequency", "      namespace.id\n    ]\n    evaluationFrequency", /storage-availability: scope \$\{namespace\.id\} is not the Microsoft\.Storage\/storageAccounts resource/],
    ["          'ServerBusyError'\n", "          'Success'\n", /storage-throttled: ResponseType values .* must include ServerBusyError/],
    ["      storageAccount.id\n      functionApp.id\n", "      storageAccount.id\n", /resource-health-unhealthy: scopes are/],
    ["equals: 'ResourceHealth'", "equals: 'ServiceHealth'", /resource-health-unhealthy: condition must have category equals ResourceHealth/],
    ["equals: 'Unavailable'", "equals: 'Available'", /resource-health-unhealthy: condition must match properties\.currentHealthStatus Unavailable/],
    ["runbook: '${runbookBaseUrl}/resource-health-unhealthy.md'", "runbook: '${runbookBaseUrl}/index.md'", /resource-health-unhealthy: webhookProperties\.runbook/],
    ["| where settled >= 5", "| where settled >= 1", /order-status-freshness: query must contain settled >= 5/],
    ["metricMeasureColumn: 'p95_s'", "metricMeasureColumn: 'settled'", /order-status-freshness: metricMeasureColumn settled, want p95_s/],
    ["threshold: freshnessP95ThresholdSeconds", "threshold: 300", /order-status-freshness: threshold 300, want the parameter freshnessP95ThresholdSeconds/],
    ["excess = scheduled - 2 * created_30m", "excess = scheduled - created_30m", /order-status-scheduled-surge: query must contain excess = scheduled - 2/],
    ["metricMeasureColumn: 'excess'", "metricMeasureColumn: 'scheduled'", /order-status-scheduled-surge: metricMeasureColumn scheduled, want excess/],
    ["      logAnalytics.id\n    ]\n    evaluationFrequency: 'PT5M'\n    windowSize: 'PT30M'", "      appInsights.id\n    ]\n    evaluationFrequency: 'PT5M'\n    windowSize: 'PT30M'", /order-status-scheduled-surge: scope \$\{appInsights\.id\} is not the Log Analytics workspace/],
    ["windowSize: 'PT30M'", "windowSize: 'PT15M'", /order-status-scheduled-surge: windowSize PT15M, want PT30M/],
    ["| where minutes >= 10 and waiting > 0 and executions == 0", "| where minutes >= 10 and waiting > 0", /order-status-no-executions: query must contain executions == 0/],
    ["// Log Analytics workspace: AzureMetrics, AppTraces and AppRequests\n", "", /order-status-no-executions: the query's first line must be/],
    ['tostring(s.source) == "poison"', 'tostring(s.source) == "dlq"', /order-status-no-executions: query must contain source\) == "poison"/],
    ["evaluationFrequency: 'PT5M'\n    windowSize: 'PT15M'\n    autoMitigate: true\n    criteria: {\n      allOf: [\n        {\n          query: failedInvocationsQuery", "evaluationFrequency: 'PT30M'\n    windowSize: 'PT15M'\n    autoMitigate: true\n    criteria: {\n      allOf: [\n        {\n          query: failedInvocationsQuery", /order-status-failed-invocations: evaluationFrequency PT30M is longer than windowSize PT15M/],
  ];
  for (const [from, to, want] of cases) {
    assert.ok(source.includes(from), `alerts.bicep no longer contains ${JSON.stringify(from)}: update this case`);
    const p = await Project.load({ 'alerts/alerts.bicep': source.replace(from, to) });
    const problems = checkAlerts(p);
    assert.match(problems.join('\n'), want, `for ${JSON.stringify(from)} got:\n${problems.join('\n') || '(none)'}`);
  }
});

test('the workbook resource: shared, in the workbook gallery, on Application Insights, content from workbook.json', async () => {
  const { problems } = checkWorkbook(project);
  assert.deepEqual(problems, []);

  const source = read('alerts/alerts.bicep');
  const cases = [
    ["kind: 'shared'", "kind: 'user'", /workbook kind user, want shared/],
    ["category: 'workbook'", "category: 'insights'", /workbook category insights, want workbook/],
    ['sourceId: appInsights.id', 'sourceId: namespace.id', /sourceId .*namespace\.id.*, want the id of the Application Insights component/],
    ["displayName: 'Order status operations'", 'displayName: actionGroupName', /workbook displayName: want a literal name/],
    ["loadTextContent('workbook.json')", "loadTextContent('other.json')", /want loadTextContent\('workbook\.json'\)/],
    ["serializedData: replace(replace(loadTextContent('workbook.json')", "serializedData: replace(replace(string(loadJsonContent('workbook.json'))", /want loadTextContent/],
  ];
  for (const [from, to, want] of cases) {
    assert.ok(source.includes(from), `alerts.bicep no longer contains ${JSON.stringify(from)}: update this case`);
    const p = await Project.load({ 'alerts/alerts.bicep': source.replace(from, to) });
    assert.match(checkWorkbook(p).problems.join('\n'), want, `for ${JSON.stringify(from)}`);
  }
});

/**
 * Metric aggregation codes in workbook JSON (MetricsItem/2.0): read from the
 * public Azure Monitor workbook templates (microsoft/Application-Insights-Workbooks),
 * where every chart titled "Average"/"Avg" uses 4, "Max"/"Maximum" 3,
 * "Minimum" 2, "Sum" 1 and "Count" 7.
 */
const WORKBOOK_AGGREGATIONS = { 1: 'sum', 2: 'min', 3: 'max', 4: 'average', 7: 'count' };

/** Problems with metric charts whose title names an aggregation other than the one they use. */
function workbookAggregationProblems(wb) {
  const problems = [];
  for (const item of wb.items.filter((i) => i.type === 10)) {
    const { title, metrics } = item.content;
    for (const m of metrics) {
      const name = WORKBOOK_AGGREGATIONS[m.aggregation];
      if (!name) {
        problems.push(`${item.name}: aggregation ${m.aggregation} is not a known workbook aggregation`);
        continue;
      }
      const said = /\((?:[^)]*, )?(max|min|average|sum|count)\)/i.exec(title)?.[1]?.toLowerCase();
      if (!said) problems.push(`${item.name}: title "${title}" does not say which aggregation the chart shows`);
      else if (said !== name) problems.push(`${item.name}: title says ${said} but aggregation ${m.aggregation} is ${name}`);
    }
  }
  return problems;
}

test('workbook metric charts use the aggregation their titles name', () => {
  const wb = JSON.parse(read('alerts/workbook.json'));
  assert.deepEqual(workbookAggregationProblems(wb), []);
  const broken = structuredClone(wb);
  broken.items.find((i) => i.name === 'queue-and-poison-depth').content.metrics[0].aggregation = 4;
  assert.match(workbookAggregationProblems(broken).join('\n'), /queue-and-poison-depth: title says max but aggregation 4 is average/);
  const untitled = structuredClone(wb);
  untitled.items.find((i) => i.name === 'dead-lettered-depth').content.title = 'Dead-lettered messages';
  assert.match(workbookAggregationProblems(untitled).join('\n'), /does not say which aggregation/);
});

test('the workbook shows queue and poison depth, dead letters by reason, oldest age, handler results and duration', () => {
  const text = read('alerts/workbook.json');
  const wb = JSON.parse(text);
  assert.equal(wb.version, 'Notebook/1.0');
  const items = wb.items;
  const metrics = items.filter((i) => i.type === 10).map((i) => i.content);
  const queries = items.filter((i) => i.type === 3).map((i) => i.content.query);
  const metricFor = (name) => metrics.find((m) => m.metrics.some((x) => x.metric.endsWith(`--${name}`)));
  for (const name of ['ActiveMessages', 'DeadletteredMessages']) {
    const m = metricFor(name);
    assert.ok(m, `no metric chart for ${name}`);
    const entities = m.filters?.find((f) => f.key === 'EntityName')?.values ?? [];
    assert.deepEqual([...entities].sort(), ['order-status', 'order-status-poison'], `${name} chart entities`);
    assert.deepEqual(m.resourceIds, ['__SERVICE_BUS_NAMESPACE_ID__']);
  }
  const has = (...needles) => queries.some((q) => needles.every((n) => q.includes(n)));
  assert.ok(has('deadletter_stats', 'reason', 'depth'), 'no query for dead letters by reason');
  // Every dead-letter panel counts a line once though it may arrive twice
  // (stdout and the invocation's Logs), and knows the poison queue's DLQ.
  const deadLetterQueries = queries.filter((q) => q.includes('deadletter_stats'));
  assert.ok(deadLetterQueries.length >= 3, `want depth, age and table panels, got ${deadLetterQueries.length}`);
  for (const q of deadLetterQueries) assert.match(q, /by run_id, source, reason;/, `dead-letter panel without per-run dedupe:\n${q}`);
  assert.match(text, /poison-dlq/, 'the workbook does not name the poison-dlq source');
  assert.ok(has('deadletter_stats', 'oldest_age_seconds', 'timechart'), 'no chart of the oldest dead-letter age');
  assert.ok(has('result', 'summarize'), 'no query for handler results');
  assert.ok(has('operation_Name == "OrderStatus"', 'percentile(duration'), 'no query for handler duration');
  // Freshness (issue 18.3): p50/p95/p99 of enqueued -> settled, by hour.
  assert.ok(has('lag_ms', 'percentile(lag_s, 50)', 'percentile(lag_s, 95)', 'percentile(lag_s, 99)', 'bin(timestamp, 1h)'), 'no freshness tile (p50/p95/p99 of lag_ms by hour)');

  // The placeholders are exactly the ones alerts.bicep replaces.
  const placeholders = [...new Set(text.match(/__[A-Z_]+__/g))].sort();
  assert.deepEqual([...checkWorkbook(project).placeholders].sort(), placeholders);
  assert.deepEqual(placeholders, ['__APPLICATION_INSIGHTS_ID__', '__SERVICE_BUS_NAMESPACE_ID__']);
  // The message panels read the fleet-wide figures (issue 18.2): every
  // instance's fleet_metrics increases, summed; never one instance's view.
  const fleetPanel = (name, ...needles) => {
    const q = items.find((i) => i.name === name)?.content.query ?? '';
    return ['message has "fleet_metrics"', 'tostring(m.msg) == "fleet_metrics"', 'mv-expand s = m.series', 'sum(todouble(s.value))', ...needles].filter((n) => !q.includes(n));
  };
  assert.deepEqual(fleetPanel('handler-results', 'orderstatus_messages_total', 'by result = tostring(s.labels.result)'), []);
  assert.deepEqual(fleetPanel('store-work', 'orderstatus_store_round_trips_total', 'orderstatus_etag_conflicts_total', 'orderstatus_cache_hits_total'), []);
  assert.deepEqual(fleetPanel('sweeper-actions', 'orderstatus_deadletter_actions_total', 's.labels.action'), []);
  const results = items.find((i) => i.name === 'handler-results').content.query;
  const matchesResultKey = (q) => q.includes('sum(todouble(s.value))');
  assert.ok(!matchesResultKey(results.replace('sum(todouble(s.value))', 'count()')), 'the fleet panel check cannot fail');
});

test('alerts/README.md lists every alert once, and no other', () => {
  const rows = (text) => [...text.matchAll(/^\| `([a-z-]+)` \|/gm)].map((m) => m[1]).sort();
  const alerts = alertRules(project).map((r) => r.name).sort();
  assert.deepEqual(rows(read('alerts/README.md')), alerts);
  const dropped = read('alerts/README.md').replace(/^\| `storage-throttled` \|.*\n/m, '');
  assert.notDeepEqual(rows(dropped), alerts, 'the README check cannot fail');
});
