// Invariants of alerts/: the alert set and what each alert watches, the
// runbook link on every alert, one runbook per alert and one alert per
// runbook, the runbooks' shape, and the workbook.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import { alertRules, checkAlerts, logAlertQueries, EXPECTED_ALERTS } from './lib/alert-rules.mjs';
import { readRunbooks, parseRunbook, handlerInvocations, squashWhitespace, RUNBOOK_SECTIONS } from './lib/runbooks.mjs';

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
    ["description: '${alert.summary} Runbook: ${runbookBaseUrl}/${alert.name}.md'\n    severity: alert.severity\n    enabled: true\n    scopes: [\n      appInsights.id", "description: alert.summary\n    severity: alert.severity\n    enabled: true\n    scopes: [\n      appInsights.id", /description/],
    ["name: 'order-status-backlog'", "name: 'order-status-queue-depth'", /alerts: got/],
    ["metricName: 'ThrottledRequests'", "metricName: 'UserErrors'", /metricName UserErrors/],
    ["| where success == false\n| project", "| project", /query must contain success == false/],
    ["metricMeasureColumn: 'oldest_age_seconds'", "metricMeasureColumn: 'depth'", /metricMeasureColumn/],
    ["threshold: backlogThreshold", "threshold: 1000", /threshold 1000, want the parameter backlogThreshold/],
  ];
  for (const [from, to, want] of cases) {
    assert.ok(source.includes(from), `alerts.bicep no longer contains ${JSON.stringify(from)}: update this case`);
    const p = await Project.load({ 'alerts/alerts.bicep': source.replace(from, to) });
    const problems = checkAlerts(p);
    assert.match(problems.join('\n'), want, `for ${JSON.stringify(from)} got:\n${problems.join('\n') || '(none)'}`);
  }
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
  assert.ok(has('deadletter_stats', 'oldest_age_seconds', 'timechart'), 'no chart of the oldest dead-letter age');
  assert.ok(has('result', 'summarize'), 'no query for handler results');
  assert.ok(has('operation_Name == "OrderStatus"', 'percentile(duration'), 'no query for handler duration');

  // The placeholders are exactly the ones alerts.bicep replaces.
  const placeholders = [...new Set(text.match(/__[A-Z_]+__/g))].sort();
  const bicep = read('alerts/alerts.bicep');
  assert.match(bicep, /loadTextContent\('workbook\.json'\)/);
  for (const p of placeholders) assert.ok(bicep.includes(`'${p}'`), `alerts.bicep does not replace ${p}`);
  assert.deepEqual(placeholders, ['__APPLICATION_INSIGHTS_ID__', '__SERVICE_BUS_NAMESPACE_ID__']);
});
