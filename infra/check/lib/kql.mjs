// Parses and semantically analyses KQL offline with the Kusto language
// service (@kusto/language-service-next, the engine behind Azure Data
// Explorer's and Log Analytics' editors), against the classic Application
// Insights schema the alerts and the workbook are scoped to. It reports what
// Azure would refuse when it first runs the query: syntax errors, unknown
// tables, columns and functions; and one thing it would silently get wrong:
// an equality between values of different types, such as the string
// requests.success compared with false (always false for a string).

import { createRequire } from 'node:module';
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
 * The Log Analytics workspace tables the workspace-scoped log alerts read
 * (workspace-based Application Insights writes AppTraces and AppRequests
 * there; the namespace's diagnostic setting writes AzureMetrics). A query
 * is analysed against this schema when its first line is WORKSPACE_MARKER.
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
