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

// The dead-letter runbooks, rewritten for the dead-letter store (issue 16).
const DEAD_LETTER_RUNBOOKS = ['order-status-dead-lettered', 'order-status-poison-parked', 'dead-letter-oldest-age', 'dead-letter-sweeper-heartbeat'];

// The handler sub-commands that change something.
const ACTIONS = ['replay', 'discard', 'archive', 'restore', 'sweep'];

/**
 * Problems with the order of the handler commands of one dead-letter
 * runbook: it starts with stats, then groups, then find --order; its first
 * action is a --dry-run, and the same action without it follows; the
 * Verification section reads stats again.
 */
export function deadLetterRunbookProblems(book) {
  const problems = [];
  const all = handlerInvocations(book.text);
  const findAt = all.findIndex((i) => i.sub === 'find' && i.flags.includes('--order'));
  const opening = all.slice(0, findAt + 1).map((i) => i.sub).join(' ');
  if (findAt < 0 || !/^stats (groups )+find$/.test(opening)) {
    problems.push(`${book.name}.md: handler commands start "${opening || all.slice(0, 3).map((i) => i.sub).join(' ')}", want stats, groups, then find --order`);
  }
  const actions = all.filter((i) => ACTIONS.includes(i.sub));
  const firstAction = actions[0];
  if (!firstAction) {
    problems.push(`${book.name}.md: no action (${ACTIONS.join(', ')})`);
  } else {
    if (!firstAction.flags.includes('--dry-run')) problems.push(`${book.name}.md: first action "${firstAction.command}" is not a --dry-run`);
    const filter = (i) => i.flags.filter((f) => !['--dry-run', '--yes', '--json'].includes(f)).join(' ');
    const real = actions.find((i) => i.sub === firstAction.sub && !i.flags.includes('--dry-run') && filter(i) === filter(firstAction));
    if (!real) problems.push(`${book.name}.md: "${firstAction.command}" is not followed by the same command without --dry-run`);
    if (all.indexOf(firstAction) < findAt) problems.push(`${book.name}.md: an action comes before stats, groups and find --order`);
  }
  const verification = book.sections.get('Verification');
  if (!verification || !handlerInvocations(verification.text).some((i) => i.sub === 'stats')) {
    problems.push(`${book.name}.md: ## Verification does not run orderstatus deadletters stats`);
  }
  return problems;
}

// A promise of a CLI to come (issue 16: "until the CLI exists" was written 13
// times after the CLI shipped).
const CLI_TO_COME = /until (the|that) CLI|once it exists|CLI does not exist|not (yet )?released/i;

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
    assert.doesNotMatch(book.text, CLI_TO_COME, `${book.name}.md promises a CLI to come; the CLI exists`);
  });
}

for (const name of DEAD_LETTER_RUNBOOKS) {
  test(`runbook ${name}: stats, groups, find --order, the action as a --dry-run first, stats to verify`, () => {
    const book = runbooks.find((b) => b.name === name);
    assert.ok(book, `no runbook ${name}`);
    assert.deepEqual(deadLetterRunbookProblems(book), []);
  });
}

test('the dead-letter runbook order check can fail', () => {
  const book = runbooks.find((b) => b.name === 'order-status-dead-lettered');
  const broken = (from, to) => {
    assert.ok(book.text.includes(from), `no longer contains ${JSON.stringify(from)}: update this case`);
    const text = book.text.replace(from, to);
    return deadLetterRunbookProblems({ name: book.name, text, ...parseRunbook(text) }).join('\n');
  };
  assert.match(broken('bin/orderstatus deadletters groups --source dlq\n', ''), /start "stats find", want stats, groups, then find --order/);
  assert.match(broken('--state open --dry-run\n   bin/orderstatus deadletters replay --source dlq --reason MaxDeliveryCountExceeded --state open --yes', '--state open --yes'),
    /first action .* is not a --dry-run/);
  assert.match(broken('bin/orderstatus deadletters replay --source dlq --reason MaxDeliveryCountExceeded --state open --yes', 'bin/orderstatus deadletters replay --source dlq --state open --yes'),
    /is not followed by the same command without --dry-run/);
  assert.match(broken('```sh\nbin/orderstatus deadletters stats\nbin/orderstatus deadletters find', '```sh\nbin/orderstatus deadletters find'), /Verification does not run orderstatus deadletters stats/);
  for (const promise of ['Until the CLI exists: use the portal', 'until that CLI is released']) assert.match(promise, CLI_TO_COME);
});

test('no runbook and not alerts/README.md promises a CLI to come', () => {
  assert.doesNotMatch(read('alerts/README.md'), CLI_TO_COME);
  for (const book of runbooks) assert.doesNotMatch(book.text, CLI_TO_COME, book.name);
});

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
    ['```sh\naz storage entity query --account-name "$ST" --table-name deadletters --auth-mode login --num-results 50 --query items -o table\n```\n', '--num-results 50 --query items -o table', '--num-results 50 -o table', /needs --query items/],
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
    ["threshold: 0\n    timeAggregation: 'Total'\n    windowSize: 'PT5M'\n  }\n  {\n    name: 'service-bus-throttled-requests'", "threshold: 0\n    timeAggregation: 'Maximum'\n    windowSize: 'PT5M'\n  }\n  {\n    name: 'service-bus-throttled-requests'", /service-bus-server-errors: timeAggregation Maximum for ServerErrors/],
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
    // Issue 30.1: the scheduled-surge alert reads the platform metric on order-status, at its peak.
    ["metricName: 'ScheduledMessages'", "metricName: 'ActiveMessages'", /order-status-scheduled-surge: metricName ActiveMessages, want ScheduledMessages/],
    ["threshold: scheduledMessagesThreshold\n    timeAggregation: 'Maximum'", "threshold: scheduledMessagesThreshold\n    timeAggregation: 'Total'", /order-status-scheduled-surge: timeAggregation Total for ScheduledMessages, want one of Maximum, Average/],
    ["threshold: scheduledMessagesThreshold\n    timeAggregation: 'Maximum'", "threshold: scheduledMessagesThreshold\n    timeAggregation: 'Average'", /order-status-scheduled-surge: timeAggregation Average, want Maximum/],
    ["threshold: scheduledMessagesThreshold", "threshold: 500", /order-status-scheduled-surge: threshold 500, want the parameter scheduledMessagesThreshold/],
    ["metricName: 'ScheduledMessages'\n    dimensions: [\n      {\n        name: 'EntityName'\n        operator: 'Include'\n        values: [\n          orderStatusQueueName", "metricName: 'ScheduledMessages'\n    dimensions: [\n      {\n        name: 'EntityName'\n        operator: 'Include'\n        values: [\n          poisonQueueName", /order-status-scheduled-surge: EntityName values .* must include order-status/],
    ["evaluationFrequency: 'PT5M'\n    windowSize: 'PT15M'\n    autoMitigate: true\n    criteria: {\n      allOf: [\n        {\n          query: failedInvocationsQuery", "evaluationFrequency: 'PT30M'\n    windowSize: 'PT15M'\n    autoMitigate: true\n    criteria: {\n      allOf: [\n        {\n          query: failedInvocationsQuery", /order-status-failed-invocations: evaluationFrequency PT30M is longer than windowSize PT15M/],
  ];
  for (const [from, to, want] of cases) {
    assert.ok(source.includes(from), `alerts.bicep no longer contains ${JSON.stringify(from)}: update this case`);
    const p = await Project.load({ 'alerts/alerts.bicep': source.replace(from, to) });
    const problems = checkAlerts(p);
    assert.match(problems.join('\n'), want, `for ${JSON.stringify(from)} got:\n${problems.join('\n') || '(none)'}`);
  }
});

// Issue 16: the sweeper drains a dead letter within one schedule period, so
// the dead-lettered and poison-parked alerts must see a message that spent
// only seconds in Service Bus. They read the sweeper's lines, whose stored
// field counts every message a run drained; each mutation below is a way to
// lose that and must fail the checks.
test('the dead-letter count alerts fire on a message the sweeper drained within minutes', async () => {
  const source = read('alerts/alerts.bicep');
  const queries = logAlertQueries(project);
  for (const name of ['order-status-dead-lettered', 'order-status-poison-parked']) {
    assert.equal(alertRules(project).find((r) => r.name === name)?.kind, 'log', `${name} must be a log alert on the sweeper's lines`);
    assert.match(queries[name], /\| where stored > 0 or depth > 0\n/, `${name} must count a run's stored messages`);
  }
  const deadLettered = source.slice(source.indexOf('var deadLetteredQuery'), source.indexOf('var poisonParkedQuery'));
  const oldMetric = `var metricAlerts = [
  {
    name: 'order-status-dead-lettered'
    severity: 2
    summary: 'x'
    metricName: 'DeadletteredMessages'
    dimensions: [
      {
        name: 'EntityName'
        operator: 'Include'
        values: [
          orderStatusQueueName
          poisonQueueName
        ]
      }
    ]
    operator: 'GreaterThan'
    threshold: 0
    timeAggregation: 'Maximum'
  }
`;
  const cases = [
    // Only what is still open: a message drained and closed in one run
    // (a poison InvalidPayload archived at once) would never fire.
    [deadLettered, deadLettered.replace('| where stored > 0 or depth > 0', '| where depth > 0'), /order-status-dead-lettered: query must contain where stored > 0 or depth > 0/],
    // stored not read from the line at all.
    [deadLettered, deadLettered.replace('stored = coalesce(tolong(s.stored), tolong(customDimensions.stored))', 'stored = 0'), /order-status-dead-lettered: query must contain stored = coalesce/],
    // The poison queue's dead-letter queue forgotten.
    [deadLettered, deadLettered.replace('source in ("dlq", "poison-dlq")', 'source == "dlq"'), /order-status-dead-lettered: query must contain where source in \("dlq", "poison-dlq"\)/],
    // A window shorter than a sweeper period can miss a run's line.
    ["evaluationFrequency: 'PT5M'\n    windowSize: 'PT15M'\n    autoMitigate: true\n    criteria: {\n      allOf: [\n        {\n          query: deadLetteredQuery", "evaluationFrequency: 'PT5M'\n    windowSize: 'PT5M'\n    autoMitigate: true\n    criteria: {\n      allOf: [\n        {\n          query: deadLetteredQuery", /order-status-dead-lettered: windowSize PT5M, want PT15M/],
    // Back to the Service Bus gauge, sampled per minute.
    ["var metricAlerts = [\n", oldMetric, /order-status-dead-lettered: kind metric, want log/],
    ["query: poisonParkedQuery\n          timeAggregation: 'Count'\n          dimensions: [", "query: poisonParkedQuery\n          timeAggregation: 'Count'\n          dimensions: [\n          ]\n          x: [", /order-status-poison-parked: dimensions \[\], want \["source","reason"\]/],
  ];
  for (const [from, to, want] of cases) {
    assert.ok(source.includes(from), `alerts.bicep no longer contains ${JSON.stringify(from.slice(0, 80))}: update this case`);
    const p = await Project.load({ 'alerts/alerts.bicep': source.replace(from, to) });
    const problems = checkAlerts(p);
    assert.match(problems.join('\n'), want, `got:\n${problems.join('\n') || '(none)'}`);
  }
});

/**
 * The fields of the deadletter_stats line, read from the sweeper's Go source (stats.go)
 * (the attributes emitStats logs), plus slog's own keys.
 */
function statsLineFields() {
  const go = read('handler/internal/deadletter/stats.go');
  const start = go.indexOf('func (s *Sweeper) emitStats(');
  assert.ok(start >= 0, 'no emitStats in handler/internal/deadletter/stats.go: update this check');
  const body = go.slice(start, go.indexOf('\n}\n', start));
  const fields = [...body.matchAll(/slog\.\w+\("(\w+)"/g)].map((m) => m[1]);
  assert.ok(fields.length >= 5, `found only ${fields} in emitStats`);
  return new Set(['time', 'level', 'msg', ...fields]);
}

/** The line fields a deadletter_stats query reads (s.<f> and customDimensions.<f>) that the line does not have. */
function unknownStatsFields(query, fields) {
  const read = [...query.matchAll(/\b(?:s|customDimensions)\.(\w+)/g)].map((m) => m[1]);
  return [...new Set(read.filter((f) => !fields.has(f)))];
}

/** The keys of the sweeper's deadletter_action line (the key arguments of its log call in actions.go). */
function actionLineFields() {
  const go = read('handler/internal/deadletter/actions.go');
  const start = go.indexOf('s.log.Info("deadletter_action",');
  assert.ok(start >= 0, 'no deadletter_action log call in handler/internal/deadletter/actions.go: update this check');
  const call = go.slice(start + 's.log.Info("deadletter_action",'.length, go.indexOf(')\n', start));
  // Key-value pairs: every other argument is a key.
  const args = call.split(/,\s*/).map((a) => a.trim()).filter(Boolean);
  const keys = args.filter((_, i) => i % 2 === 0).map((k) => /^"(\w+)"$/.exec(k)?.[1]);
  assert.ok(keys.every(Boolean) && keys.length >= 5, `cannot read the keys of the deadletter_action call: ${args}`);
  return new Set(['time', 'level', 'msg', ...keys]);
}

test('the workbook\'s actions panel reads only keys the sweeper logs with deadletter_action', () => {
  const fields = actionLineFields();
  for (const f of ['action', 'entry_id']) assert.ok(fields.has(f), `deadletter_action has no ${f}`);
  const q = JSON.parse(read('alerts/workbook.json')).items.find((i) => i.name === 'dead-letter-actions').content.query;
  const readKeys = (query) => [...new Set([...query.matchAll(/\b(?:a|customDimensions)\.(\w+)/g)].map((m) => m[1]))].filter((k) => !fields.has(k));
  assert.deepEqual(readKeys(q), []);
  assert.deepEqual(readKeys(q.replace('a.entry_id', 'a.entry')), ['entry']);
});

test('every deadletter_stats query reads only fields the sweeper logs', () => {
  const fields = statsLineFields();
  for (const f of ['depth', 'oldest_age_seconds', 'in_queue', 'left', 'stored']) assert.ok(fields.has(f), `the sweeper's line has no ${f}`);
  const queries = [
    ...Object.entries(logAlertQueries(project)).map(([n, q]) => [`alert ${n}`, q]),
    ...JSON.parse(read('alerts/workbook.json')).items.filter((i) => i.type === 3).map((i) => [`workbook ${i.name}`, i.content.query]),
    ...runbooks.flatMap((b) => b.codeBlocks.filter((c) => c.lang === 'kql').map((c) => [`${b.name}.md:${c.line}`, c.code])),
  ].filter(([, q]) => q.includes('deadletter_stats'));
  assert.ok(queries.length >= 8, `found ${queries.length} deadletter_stats queries`);
  for (const [where, q] of queries) assert.deepEqual(unknownStatsFields(q, fields), [], `${where} reads fields the line does not have`);
  const age = logAlertQueries(project)['dead-letter-oldest-age'];
  assert.deepEqual(unknownStatsFields(age.replace('s.oldest_age_seconds', 's.oldest_age'), fields), ['oldest_age']);
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
  untitled.items.find((i) => i.name === 'queue-and-poison-depth').content.title = 'Queue and poison depth';
  assert.match(workbookAggregationProblems(untitled).join('\n'), /does not say which aggregation/);
});

test('the workbook shows queue depth, dead letters by source and reason, oldest age, stored and actions, handler results and duration', () => {
  const text = read('alerts/workbook.json');
  const wb = JSON.parse(text);
  assert.equal(wb.version, 'Notebook/1.0');
  const items = wb.items;
  const metrics = items.filter((i) => i.type === 10).map((i) => i.content);
  const queries = items.filter((i) => i.type === 3).map((i) => i.content.query);
  const metricFor = (name) => metrics.find((m) => m.metrics.some((x) => x.metric.endsWith(`--${name}`)));
  const active = metricFor('ActiveMessages');
  assert.ok(active, 'no metric chart for ActiveMessages');
  assert.deepEqual([...(active.filters?.find((f) => f.key === 'EntityName')?.values ?? [])].sort(), ['order-status', 'order-status-poison'], 'ActiveMessages chart entities');
  assert.deepEqual(active.resourceIds, ['__SERVICE_BUS_NAMESPACE_ID__']);
  // The sweeper drains the dead-letter queues within minutes: a chart of the
  // per-minute DeadletteredMessages gauge would show nothing.
  assert.equal(metricFor('DeadletteredMessages'), undefined, 'the DeadletteredMessages chart shows nothing once the sweeper drains the queues: read deadletter_stats');
  const panel = (name) => items.find((i) => i.name === name)?.content.query ?? '';
  const panelHas = (name, ...needles) => {
    const q = panel(name);
    for (const n of needles) assert.ok(q.includes(n), `workbook panel ${name} does not contain ${n}:\n${q}`);
  };
  panelHas('dead-letters-by-reason', 'deadletter_stats', 'arg_max(timestamp, run_id) by source', 'depth', 'in_queue', 'left', 'oldest_age_seconds');
  panelHas('dead-letter-depth', 'deadletter_stats', 'depth', 'strcat(source, "/", reason)');
  panelHas('dead-letter-oldest-age', 'deadletter_stats', 'oldest_age_seconds', 'timechart');
  panelHas('dead-letters-stored', 'deadletter_stats', 'stored = sum(stored)', 'bin(timestamp, 1h)');
  panelHas('dead-letter-actions', 'deadletter_action', 'by action, bin(timestamp, 1h)', 'dcount(');
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
  // Rows of the alert table only: the CLI's command table further down has rows of the same shape.
  const rows = (text) => [...text.split('| command | what it does |')[0].matchAll(/^\| `([a-z-]+)` \|/gm)].map((m) => m[1]).sort();
  const alerts = alertRules(project).map((r) => r.name).sort();
  assert.deepEqual(rows(read('alerts/README.md')), alerts);
  const dropped = read('alerts/README.md').replace(/^\| `storage-throttled` \|.*\n/m, '');
  assert.notDeepEqual(rows(dropped), alerts, 'the README check cannot fail');
});
