// Parses and semantically analyses KQL offline with the Kusto language
// service (@kusto/language-service-next, the engine behind Azure Data
// Explorer's and Log Analytics' editors), against the classic Application
// Insights schema the alerts and the workbook are scoped to. It reports what
// Azure would refuse when it first runs the query: syntax errors, unknown
// tables, columns and functions; and one thing it would silently get wrong:
// an equality between values of different types, such as the string
// requests.success compared with false (always false for a string).
// azureMetricsProblems adds one thing Azure would run without complaint and
// answer with nothing, for ever: a query over AzureMetrics naming a metric
// that diagnostic settings do not export (lib/exportable-metrics.json).

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './bicep.mjs';

const requireTools = createRequire(path.join(repoRoot, 'tools', 'package.json'));

let kusto;
function language() {
  if (!kusto) {
    requireTools('@kusto/language-service-next/bridge.js');
    requireTools('@kusto/language-service-next/Kusto.Language.Bridge.js');
    kusto = globalThis.Kusto.Language;
  }
  return kusto;
}

/**
 * The classic Application Insights tables the queries read, with the columns
 * of the classic schema (what a scheduled query rule or workbook scoped to an
 * Application Insights component sees). Columns not listed are unknown on
 * purpose: add one only after checking the table's schema in the portal.
 */
const COMMON = 'timestamp:datetime, itemType:string, customDimensions:dynamic, customMeasurements:dynamic, '
  + 'operation_Name:string, operation_Id:string, operation_ParentId:string, cloud_RoleName:string, '
  + 'cloud_RoleInstance:string, appId:string, appName:string, iKey:string, sdkVersion:string, itemId:string, itemCount:int';
export const APP_INSIGHTS_SCHEMA = {
  traces: `(message:string, severityLevel:int, ${COMMON})`,
  // success is a string ("True"/"False") in the classic schema.
  requests: `(id:string, name:string, url:string, success:string, resultCode:string, duration:real, performanceBucket:string, source:string, ${COMMON})`,
  exceptions: `(problemId:string, type:string, message:string, outerMessage:string, innermostMessage:string, severityLevel:int, details:dynamic, ${COMMON})`,
  dependencies: `(id:string, target:string, type:string, name:string, data:string, success:string, resultCode:string, duration:real, ${COMMON})`,
};

/**
 * Log Analytics workspace tables, for a query written for the workspace
 * (workspace-based Application Insights writes AppTraces and AppRequests
 * there; the diagnostic settings write AzureMetrics). No alert runs on the
 * workspace today; the retired AzureMetrics alerts' queries
 * (alerts/testdata) are analysed here. A query is analysed against this
 * schema when its first line is WORKSPACE_MARKER.
 */
export const WORKSPACE_SCHEMA = {
  AppTraces: '(TimeGenerated:datetime, Message:string, SeverityLevel:int, Properties:dynamic, OperationName:string, OperationId:string, AppRoleName:string, AppRoleInstance:string, _ResourceId:string)',
  AppRequests: '(TimeGenerated:datetime, Id:string, Name:string, Success:bool, ResultCode:string, DurationMs:real, OperationName:string, OperationId:string, AppRoleName:string, AppRoleInstance:string, Properties:dynamic, _ResourceId:string)',
  AzureMetrics: '(TimeGenerated:datetime, ResourceId:string, _ResourceId:string, ResourceProvider:string, Resource:string, ResourceGroup:string, SubscriptionId:string, MetricName:string, Total:real, Count:real, Maximum:real, Minimum:real, Average:real, TimeGrain:string, UnitName:string)',
};

/** The first line of a query written for the Log Analytics workspace. */
export const WORKSPACE_MARKER = '// Log Analytics workspace';

/** Whether query is written for the workspace schema (its first line is the marker). */
export function isWorkspaceQuery(query) {
  return query.trimStart().startsWith(WORKSPACE_MARKER);
}

const globals = {};
function schemaGlobals(kind) {
  if (!globals[kind]) {
    const K = language();
    const S = K.Symbols;
    const schema = kind === 'workspace' ? WORKSPACE_SCHEMA : APP_INSIGHTS_SCHEMA;
    const tables = Object.entries(schema).map(([name, cols]) => new S.TableSymbol.$ctor7(name, cols, null));
    globals[kind] = K.GlobalState.Default.WithDatabase(new S.DatabaseSymbol.$ctor3(kind, null, tables, false));
  }
  return globals[kind];
}

function lineCol(text, offset) {
  const before = text.slice(0, offset).split('\n');
  return `${before.length}:${before.at(-1).length + 1}`;
}

/**
 * Problems of one query, analysed against the Application Insights schema
 * or, for a query that starts with WORKSPACE_MARKER, the workspace's: every
 * error the language service reports, and
 * every == or != between operands of different types (string vs bool, ...).
 * Each problem is "<line>:<column> <code> <message>".
 */
export function kqlProblems(query) {
  const K = language();
  const code = K.KustoCode.ParseAndAnalyze(query, schemaGlobals(isWorkspaceQuery(query) ? 'workspace' : 'applicationinsights'));
  const problems = [];
  const diags = code.GetDiagnostics();
  for (let i = 0; i < diags.Count; i++) {
    const d = diags.getItem(i);
    if (d.Severity === 'Error') problems.push(`${lineCol(query, d.Start)} ${d.Code} ${d.Message}`);
  }
  const equality = new Set([K.Syntax.SyntaxKind.EqualExpression, K.Syntax.SyntaxKind.NotEqualExpression]);
  K.Syntax.SyntaxElement.WalkNodes(code.Syntax, (n) => {
    if (!equality.has(n.Kind)) return;
    const left = n.Left.ResultType?.Name;
    const right = n.Right.ResultType?.Name;
    const numeric = new Set(['int', 'long', 'real', 'decimal']);
    if (!left || !right || left === right || (numeric.has(left) && numeric.has(right)) || left === 'dynamic' || right === 'dynamic') return;
    problems.push(`${lineCol(query, n.TextStart)} type-mismatch ${n.toString().trim()} compares ${left} with ${right} (convert one side, e.g. tobool())`);
  });
  return problems;
}

/**
 * The Application Insights tables a query reads, by the symbols it
 * resolves. A workspace query's AppTraces, AppRequests, AppExceptions and
 * AppDependencies are the same rows as traces, requests, exceptions and
 * dependencies, and are named so; AzureMetrics is the platform's, not the
 * host's telemetry, and is left out.
 */
export function tablesRead(query) {
  const K = language();
  const code = K.KustoCode.ParseAndAnalyze(query, schemaGlobals(isWorkspaceQuery(query) ? 'workspace' : 'applicationinsights'));
  const found = new Set();
  K.Syntax.SyntaxElement.WalkNodes(code.Syntax, (n) => {
    const s = n.ReferencedSymbol;
    if (s && s.Kind === K.Symbols.SymbolKind.Table) found.add(s.Name);
  });
  const workspaceNames = { AppTraces: 'traces', AppRequests: 'requests', AppExceptions: 'exceptions', AppDependencies: 'dependencies' };
  return [...new Set([...found].filter((t) => t !== 'AzureMetrics').map((t) => workspaceNames[t] ?? t))].sort();
}

/**
 * The platform metrics diagnostic settings export to AzureMetrics, read from
 * lib/exportable-metrics.json (Azure Monitor's "DS Export" column, with the
 * source of each resource type).
 */
export const EXPORTABLE_METRICS = JSON.parse(readFileSync(path.join(repoRoot, 'infra/check/lib/exportable-metrics.json'), 'utf8'));

/** query without its // comments (a // inside a string literal stays). */
export function stripKqlComments(query) {
  return query.split('\n').map((line) => {
    let quote = null;
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (quote) {
        if (c === '\\') i++;
        else if (c === quote) quote = null;
      } else if (c === '"' || c === "'") {
        quote = c;
      } else if (c === '/' && line[i + 1] === '/') {
        return line.slice(0, i);
      }
    }
    return line;
  }).join('\n');
}

/** The metric names a query selects by MetricName (==, =~, in, has, contains, startswith). */
export function metricNamesNamed(query) {
  const text = stripKqlComments(query);
  const names = [];
  for (const m of text.matchAll(/\bMetricName\s*(?:==|=~|in~?|has_cs|has|contains|startswith)\s*(\([^)]*\)|"[^"]*"|'[^']*')/g)) {
    for (const q of m[1].matchAll(/"([^"]*)"|'([^']*)'/g)) names.push(q[1] ?? q[2]);
  }
  return names;
}

/**
 * Problems of one query with the AzureMetrics table: a query over it may
 * name only metrics that diagnostic settings export (EXPORTABLE_METRICS),
 * of the resource providers it selects (ResourceProvider == "...", all of
 * them when it selects none), and must name the metrics it reads. enabled,
 * when given, maps a resource type to the diagnostic-setting metric
 * categories this project enables on it (a metric of another category is
 * exportable, but not exported here). A query that does not read
 * AzureMetrics has no such problem.
 */
export function azureMetricsProblems(query, { enabled } = {}) {
  const text = stripKqlComments(query);
  if (!/\bAzureMetrics\b/.test(text)) return [];
  const selected = [...text.matchAll(/\bResourceProvider\s*(?:==|=~)\s*"([^"]+)"/g)].map((m) => m[1].toUpperCase());
  const types = Object.entries(EXPORTABLE_METRICS.resourceTypes)
    .filter(([, t]) => selected.length === 0 || selected.includes(t.resourceProvider));
  if (types.length === 0) return [`AzureMetrics: no resource type in exportable-metrics.json has ResourceProvider ${selected.join(', ')}`];
  const names = metricNamesNamed(query);
  if (names.length === 0) {
    return ['AzureMetrics: the query names no metric (MetricName == "..." or in (...)); name what it reads, so that the check can confirm diagnostic settings export it'];
  }
  const problems = [];
  for (const name of [...new Set(names)]) {
    const categoriesOf = types.flatMap(([type, t]) => Object.entries(t.exported)
      .filter(([, metrics]) => metrics.includes(name)).map(([category]) => ({ type, category })));
    if (categoriesOf.some(({ type, category }) => !enabled || (enabled[type] ?? []).includes(category))) continue;
    if (categoriesOf.length > 0) {
      const where = categoriesOf.map(({ type, category }) => `${type} exports it in category ${category}`).join('; ');
      problems.push(`AzureMetrics: MetricName "${name}": ${where}, which this project's diagnostic setting does not enable`);
      continue;
    }
    const notExported = types.filter(([, t]) => t.notExported.includes(name));
    if (notExported.length > 0) {
      for (const [type, t] of notExported) {
        problems.push(`AzureMetrics: MetricName "${name}" never has rows: ${type} does not export it through diagnostic settings (DS Export: No; ${t.source}); alert on it with a metric alert and read it with az monitor metrics list`);
      }
      continue;
    }
    problems.push(`AzureMetrics: MetricName "${name}" is not in infra/check/lib/exportable-metrics.json for ${types.map(([type]) => type).join(', ')}: read its DS Export column (${types.map(([, t]) => t.source).join('; ')}) and add it`);
  }
  return problems;
}
