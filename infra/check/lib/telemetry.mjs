// What host.json lets reach Application Insights, table by table, so that a
// query cannot read a table whose rows the host's log levels or sampling
// drop. The categories and levels are those of the Functions host's source
// (Azure/azure-webjobs-sdk at f79ea0bf, Azure/azure-functions-host at
// 89dc438d; the same table as HostRecords in package handler/internal/devkit/cost):
//   requests: FunctionExecutor logs each execution's result on Host.Results,
//     Information on success (Error on failure);
//   traces: the handler's stdout lines, which every traces query here reads
//     (deadletter_stats, the settled lines, errors), are logged on
//     Host.Function.Console at Information (WorkerConsoleLogService);
//   dependencies: written only with applicationInsights.enableDependencyTracking.
// A table read by a query must also be excluded from sampling: a sampled
// table drops rows under load, and the alerts count rows.

const LEVELS = ['trace', 'debug', 'information', 'warning', 'error', 'critical', 'none'];
const rank = (l) => LEVELS.indexOf(String(l).toLowerCase());

/** Whether host.json's logLevel lets a record of category at level through. */
export function writes(hostJson, category, level) {
  const levels = hostJson.logging?.logLevel ?? {};
  let min = levels.default ?? 'Information';
  let best = -1;
  for (const [k, v] of Object.entries(levels)) {
    if (k !== 'default' && k.length > best && category.toLowerCase().startsWith(k.toLowerCase())) {
      min = v;
      best = k.length;
    }
  }
  return rank(level) >= rank(min) && rank(level) < rank('none');
}

/** Per table: its Application Insights telemetry type, and what must write its rows. */
export const TABLE_SOURCES = {
  requests: { type: 'Request', category: 'Host.Results', level: 'Information' },
  traces: { type: 'Trace', category: 'Host.Function.Console', level: 'Information' },
  exceptions: { type: 'Exception' },
  dependencies: { type: 'Dependency', dependencyTracking: true },
};

/** Problems of reading tables under hostJson (the parsed host.json). */
export function telemetryProblems(hostJson, tables) {
  const ai = hostJson.logging?.applicationInsights ?? {};
  const sampling = ai.samplingSettings?.isEnabled ?? true;
  const excluded = new Set(String(ai.samplingSettings?.excludedTypes ?? '').split(';').map((t) => t.trim().toLowerCase()).filter(Boolean));
  const problems = [];
  for (const table of tables) {
    const src = TABLE_SOURCES[table];
    if (!src) {
      problems.push(`reads ${table}, which no host.json rule here accounts for: add it to TABLE_SOURCES`);
      continue;
    }
    if (src.category && !writes(hostJson, src.category, src.level)) {
      problems.push(`reads ${table}, but host.json's logLevel drops ${src.category} at ${src.level}`);
    }
    if (src.dependencyTracking && ai.enableDependencyTracking === false) {
      problems.push(`reads ${table}, but host.json turns enableDependencyTracking off`);
    }
    if (sampling && !excluded.has(src.type.toLowerCase())) {
      problems.push(`reads ${table}, but sampling is on and ${src.type} is not in samplingSettings.excludedTypes`);
    }
  }
  return problems;
}
