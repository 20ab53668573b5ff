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

let globals;
function appInsightsGlobals() {
  if (!globals) {
    const K = language();
    const S = K.Symbols;
    const tables = Object.entries(APP_INSIGHTS_SCHEMA).map(([name, schema]) => new S.TableSymbol.$ctor7(name, schema, null));
    globals = K.GlobalState.Default.WithDatabase(new S.DatabaseSymbol.$ctor3('applicationinsights', null, tables, false));
  }
  return globals;
}

function lineCol(text, offset) {
  const before = text.slice(0, offset).split('\n');
  return `${before.length}:${before.at(-1).length + 1}`;
}

/**
 * Problems of one query: every error the language service reports, and
 * every == or != between operands of different types (string vs bool, ...).
 * Each problem is "<line>:<column> <code> <message>".
 */
export function kqlProblems(query) {
  const K = language();
  const code = K.KustoCode.ParseAndAnalyze(query, appInsightsGlobals());
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

/** The Application Insights tables a query reads, by the symbols it resolves. */
export function tablesRead(query) {
  const K = language();
  const code = K.KustoCode.ParseAndAnalyze(query, appInsightsGlobals());
  const found = new Set();
  K.Syntax.SyntaxElement.WalkNodes(code.Syntax, (n) => {
    const s = n.ReferencedSymbol;
    if (s && s.Kind === K.Symbols.SymbolKind.Table) found.add(s.Name);
  });
  return [...found].sort();
}
