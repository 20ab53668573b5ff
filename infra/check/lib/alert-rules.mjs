// The invariants of alerts/: which alerts exist, what each one watches, the
// shape Azure Monitor expects of each rule, that every alert carries its
// runbook link, and the workbook resource. Alerts may be declared one
// resource each (the log alerts in alerts.bicep) or as a resource loop over
// a list of specs (the metric alerts); either way they are read back as one
// record per alert.

import { Expr, Template, isExpr, isPlainObject } from './bicep.mjs';
import { at, declared, durationSeconds, QUEUE_NAMES } from './infra-rules.mjs';
import { isWorkspaceQuery, WORKSPACE_MARKER } from './kql.mjs';

const SERVICE_BUS = 'Microsoft.ServiceBus/namespaces';
const STORAGE = 'Microsoft.Storage/storageAccounts';
const SITES = 'Microsoft.Web/sites';
const COMPONENTS = 'Microsoft.Insights/components';
const WORKSPACES = 'Microsoft.OperationalInsights/workspaces';

/**
 * The alerts the issues ask for. metric: metric alerts on the Service Bus
 * namespace, or on the resource type in scope (entities: the EntityName
 * values the alert must include, [] for the whole resource; dimension: a
 * dimension filter it must include; criteria: several criteria that must
 * all hold; windowSize: the window it must use). activity: activity-log
 * alerts on Resource Health (scopes: the resource types of its scopes).
 * log: scheduled query rules on Application Insights, or on the Log
 * Analytics workspace with scope 'workspace' (mustQuery: text the KQL must
 * contain).
 */
function deadLetterCount(sources) {
  return {
    kind: 'log',
    mustQuery: ['traces', 'deadletter_stats', 'parse_json', 'stored = coalesce(tolong(s.stored), tolong(customDimensions.stored))',
      'by run_id, source, reason;', sources, 'where stored > 0 or depth > 0'],
    timeAggregation: 'Count',
    measure: null,
    threshold: 0,
    // Three runs of the default 5 minute schedule: a run's line is in
    // three evaluations, so a late one is still seen.
    windowSize: 'PT15M',
    dimensions: ['source', 'reason'],
  };
}

export const EXPECTED_ALERTS = {
  // The dead-letter count alerts read the store through the sweeper's
  // deadletter_stats lines, not a Service Bus metric: the sweeper drains a
  // dead letter within one schedule period, and the queue gauges are
  // sampled once a minute (Average, Minimum, Maximum; no Total), so a
  // message drained between two samples would not show. stored > 0 counts
  // every message a run drained, however briefly it sat in Service Bus;
  // depth > 0 every entry still open and every message still waiting.
  'order-status-dead-lettered': deadLetterCount('where source in ("dlq", "poison-dlq")'),
  'order-status-poison-parked': deadLetterCount('where source == "poison"'),
  'order-status-backlog': {
    kind: 'metric', metricName: 'ActiveMessages', entities: [QUEUE_NAMES.orderStatus], threshold: 'backlogThreshold',
  },
  'service-bus-server-errors': { kind: 'metric', metricName: 'ServerErrors', entities: [], threshold: 0 },
  'service-bus-throttled-requests': { kind: 'metric', metricName: 'ThrottledRequests', entities: [], threshold: 0 },
  // Issue 18.4: the baseline alerts that were missing.
  'service-bus-user-errors': { kind: 'metric', metricName: 'UserErrors', entities: [], threshold: 'userErrorsThreshold', windowSize: 'PT15M' },
  'order-status-abandoned': {
    kind: 'metric', metricName: 'AbandonMessage', entities: [QUEUE_NAMES.orderStatus], threshold: 'abandonedThreshold', windowSize: 'PT15M',
  },
  'order-status-stalled-consumer': {
    kind: 'metric',
    windowSize: 'PT10M',
    criteria: [
      { metricName: 'OutgoingMessages', entities: [QUEUE_NAMES.orderStatus], operator: 'LessThanOrEqual', threshold: 0, timeAggregation: 'Total' },
      { metricName: 'ActiveMessages', entities: [QUEUE_NAMES.orderStatus], operator: 'GreaterThan', threshold: 0, timeAggregation: 'Minimum' },
    ],
  },
  'storage-availability': {
    kind: 'metric', scope: STORAGE, metricName: 'Availability', entities: [], operator: 'LessThan', threshold: 100, timeAggregation: 'Average',
  },
  'storage-throttled': {
    kind: 'metric', scope: STORAGE, metricName: 'Transactions', entities: [], threshold: 0,
    dimension: { name: 'ResponseType', values: ['ServerBusyError', 'ClientThrottlingError'] },
  },
  'resource-health-unhealthy': { kind: 'activity', scopes: [SERVICE_BUS, STORAGE, SITES] },
  // Issue 18.3: freshness, p95 of enqueued -> settled from the settled lines.
  'order-status-freshness': {
    kind: 'log',
    mustQuery: ['traces', 'lag_ms', 'percentile(todouble(entry.lag_ms), 95)', 'settled >= 5'],
    timeAggregation: 'Maximum',
    measure: 'p95_s',
    threshold: 'freshnessP95ThresholdSeconds',
    windowSize: 'PT15M',
  },
  // Issue 30.1: ScheduledMessages is not exported by diagnostic settings
  // (lib/exportable-metrics.json), so a log query over AzureMetrics never
  // sees it: a metric alert on order-status, read as the peak of the window.
  'order-status-scheduled-surge': {
    kind: 'metric', metricName: 'ScheduledMessages', entities: [QUEUE_NAMES.orderStatus], threshold: 'scheduledMessagesThreshold',
    timeAggregation: 'Maximum', windowSize: 'PT5M',
  },
  // order-status-no-executions is gone: its broker half is
  // order-status-stalled-consumer, its telemetry half
  // dead-letter-sweeper-heartbeat (alerts/README.md).
  'dead-letter-oldest-age': {
    kind: 'log',
    // Each line once (both copies share run_id, source and reason), the
    // latest run per source, sources with nothing waiting left out.
    mustQuery: ['traces', 'deadletter_stats', 'parse_json', 'oldest_age_seconds', 'by run_id, source, reason', 'arg_max(timestamp, run_id) by source', 'where depth > 0'],
    timeAggregation: 'Maximum',
    measure: 'oldest_age_seconds',
    threshold: 'deadLetterAgeThresholdSeconds',
  },
  'dead-letter-sweeper-heartbeat': {
    kind: 'log',
    mustQuery: ['traces', 'deadletter_stats'],
    timeAggregation: 'Count',
    measure: null,
    operator: 'LessThan',
    threshold: 1,
    // Three schedule periods of the default 5 minute sweeper schedule.
    windowSize: 'PT15M',
  },
  'order-status-failed-invocations': {
    kind: 'log',
    // requests.success is a string in classic Application Insights tables.
    mustQuery: ['requests', 'operation_Name == "OrderStatus"', 'tobool(success) == false'],
    timeAggregation: 'Count',
    measure: null,
    threshold: 'failedInvocationsThreshold',
  },
  'order-status-rescheduled': {
    kind: 'log',
    // One row per rescheduled copy (its stdout and stderr lines share the
    // copy's id); the text Logs line carries no rescheduled_id.
    mustQuery: ['traces', 'rescheduled_id', 'parse_json', 'by rescheduled_id'],
    timeAggregation: 'Count',
    measure: null,
    threshold: 'rescheduledThreshold',
  },
};

/**
 * The time aggregations that make sense for each Service Bus metric an alert
 * watches: the queue gauges are read as a maximum or an average over the
 * window, the error counters as a total (an average of counts hides bursts).
 */
export const METRIC_TIME_AGGREGATIONS = {
  ActiveMessages: ['Maximum', 'Average', 'Minimum'],
  ScheduledMessages: ['Maximum', 'Average'],
  DeadletteredMessages: ['Maximum', 'Average'],
  ServerErrors: ['Total'],
  ThrottledRequests: ['Total'],
  UserErrors: ['Total'],
  AbandonMessage: ['Total'],
  OutgoingMessages: ['Total'],
  // Storage: Availability is a percentage, Transactions a count.
  Availability: ['Average', 'Minimum'],
  Transactions: ['Total'],
};

/** The operators a static metric criterion may use. */
const METRIC_OPERATORS = ['GreaterThan', 'GreaterThanOrEqual', 'LessThan', 'LessThanOrEqual'];

/** The timeAggregation values a scheduled query rule (2022-06-15) accepts. */
export const LOG_TIME_AGGREGATIONS = ['Count', 'Average', 'Minimum', 'Maximum', 'Total'];

const METRIC_CRITERIA_ODATA_TYPE = 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria';

// Replaces <item>.<field> references (the loop variable) with the spec's
// values, in Exprs and inside string templates.
export function instantiate(value, item, spec) {
  const field = (e) => {
    const m = new RegExp(`^${item}\\.(\\w+)$`).exec(e.text.replace(/\s+/g, ''));
    return m && isPlainObject(spec) && m[1] in spec ? { hit: true, v: spec[m[1]] } : { hit: false };
  };
  if (value instanceof Template) {
    const parts = value.parts.map((p) => {
      if (!(p instanceof Expr)) return p;
      const f = field(p);
      return f.hit && typeof f.v === 'string' ? f.v : p;
    });
    const merged = [];
    for (const p of parts) {
      if (typeof p === 'string' && typeof merged.at(-1) === 'string') merged[merged.length - 1] += p;
      else merged.push(p);
    }
    if (merged.every((p) => typeof p === 'string')) return merged.join('');
    const t = Object.create(Template.prototype);
    return Object.assign(t, { text: value.text, type: value.type, ref: value.ref, parts: merged });
  }
  if (value instanceof Expr) {
    const f = field(value);
    return f.hit ? f.v : value;
  }
  if (Array.isArray(value)) return value.map((v) => instantiate(v, item, spec));
  if (isPlainObject(value)) {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = instantiate(v, item, spec);
    return out;
  }
  return value;
}

/** The pattern of a link value: '${runbookBaseUrl}/x.md' for a template, the string itself otherwise. */
function pattern(v) {
  if (v instanceof Template) return v.pattern;
  if (v instanceof Expr) return '${' + v.text + '}';
  return v;
}

/**
 * Every alert rule in the project: [{name, kind: 'metric'|'log', body (with
 * the loop spec substituted), ctx, resource}].
 */
export function alertRules(project) {
  const out = [];
  const kinds = {
    'Microsoft.Insights/metricAlerts': 'metric',
    'Microsoft.Insights/scheduledQueryRules': 'log',
    'Microsoft.Insights/activityLogAlerts': 'activity',
  };
  for (const [type, kind] of Object.entries(kinds)) {
    for (const { ctx, resource } of declared(project, type)) {
      const body = resource.body;
      if (resource.loop) {
        const specs = resource.loop.iterable;
        if (!Array.isArray(specs)) throw new Error(`${resource.symbol}: loop over ${specs}, want a literal list of alert specs`);
        for (const spec of specs) {
          const b = instantiate(body, resource.loop.item, spec);
          out.push({ name: b.name, kind, body: b, ctx, resource });
        }
      } else {
        out.push({ name: body.name, kind, body, ctx, resource });
      }
    }
  }
  return out;
}

/**
 * Checks every alert rule: the expected set, what each watches, scopes, the
 * action group, and the runbook link in the description and in the
 * notification payload. Returns problems.
 */
export function checkAlerts(project) {
  const problems = [];
  const rules = alertRules(project);
  const names = rules.map((r) => r.name);
  const want = Object.keys(EXPECTED_ALERTS).sort();
  if (JSON.stringify([...names].sort()) !== JSON.stringify(want)) {
    problems.push(`alerts: got ${JSON.stringify([...names].sort())}, want ${JSON.stringify(want)}`);
  }
  const groups = declared(project, 'Microsoft.Insights/actionGroups');
  if (groups.length !== 1) problems.push(`want one action group, got ${groups.length}`);
  const groupRef = groups[0] ? `${groups[0].resource.symbol}.id` : '?';
  if (groups[0] && !isExpr(at(groups[0].resource.body, 'properties.emailReceivers'))) {
    problems.push('action group emailReceivers: want the e-mail parameter (empty when no address is given)');
  }

  for (const rule of rules) {
    const spec = EXPECTED_ALERTS[rule.name];
    if (!spec) continue;
    const { body, ctx } = rule;
    const where = `alert ${rule.name}`;
    const link = '${runbookBaseUrl}/' + rule.name + '.md';
    const p = body.properties ?? {};
    if (rule.kind !== spec.kind) {
      problems.push(`${where}: kind ${rule.kind}, want ${spec.kind}`);
      continue;
    }
    if (!String(pattern(p.description)).endsWith(`Runbook: ${link}`)) {
      problems.push(`${where}: description ${JSON.stringify(pattern(p.description))} must end with "Runbook: ${link}"`);
    }
    const resolve = (v) => project.resolve(ctx, v).value;

    const scopeType = (scope) => (scope instanceof Expr && scope.ref?.kind === 'resource' ? ctx.file.resource(scope.ref.name)?.type : null);

    if (rule.kind === 'metric') {
      const actions = Array.isArray(p.actions) ? p.actions : [];
      if (actions.length === 0) problems.push(`${where}: no actions`);
      for (const a of actions) {
        if (!isExpr(a.actionGroupId, groupRef)) problems.push(`${where}: actionGroupId ${pattern(a.actionGroupId)}, want ${groupRef}`);
        if (pattern(at(a, 'webHookProperties.runbook')) !== link) {
          problems.push(`${where}: webHookProperties.runbook ${JSON.stringify(pattern(at(a, 'webHookProperties.runbook')))}, want ${link}`);
        }
      }
      if (body.location !== 'global') problems.push(`${where}: location ${pattern(body.location)}, want global (metric alerts are global resources)`);
      const criteria = p.criteria ?? {};
      if (criteria['odata.type'] !== METRIC_CRITERIA_ODATA_TYPE) {
        problems.push(`${where}: criteria odata.type ${pattern(criteria['odata.type'])}, want ${METRIC_CRITERIA_ODATA_TYPE}`);
      }
      checkSchedule(problems, where, p);
      if (spec.windowSize && p.windowSize !== spec.windowSize) problems.push(`${where}: windowSize ${pattern(p.windowSize)}, want ${spec.windowSize}`);
      const wantScope = spec.scope ?? SERVICE_BUS;
      const scope = p.scopes?.[0];
      if (p.scopes?.length !== 1 || scopeType(scope) !== wantScope) problems.push(`${where}: scope ${pattern(scope)} is not the ${wantScope} resource`);
      const wanted = spec.criteria ?? [spec];
      const allOf = Array.isArray(criteria.allOf) ? criteria.allOf : [];
      if (allOf.length !== wanted.length) problems.push(`${where}: want exactly ${wanted.length} criteria (all must hold), got ${allOf.length}`);
      wanted.forEach((w, i) => {
        const c = allOf[i] ?? {};
        const cw = wanted.length > 1 ? `${where}: criterion ${i + 1} (${w.metricName})` : where;
        if (c.criterionType !== 'StaticThresholdCriterion') {
          problems.push(`${cw}: criterionType ${pattern(c.criterionType)}, want StaticThresholdCriterion`);
        }
        const aggregations = METRIC_TIME_AGGREGATIONS[w.metricName] ?? [];
        if (!aggregations.includes(c.timeAggregation)) {
          problems.push(`${cw}: timeAggregation ${pattern(c.timeAggregation)} for ${w.metricName}, want one of ${aggregations.join(', ')}`);
        } else if (w.timeAggregation && c.timeAggregation !== w.timeAggregation) {
          problems.push(`${cw}: timeAggregation ${c.timeAggregation}, want ${w.timeAggregation}`);
        }
        if (c.metricName !== w.metricName) problems.push(`${cw}: metricName ${pattern(c.metricName)}, want ${w.metricName}`);
        if (c.metricNamespace !== wantScope) problems.push(`${cw}: metricNamespace ${pattern(c.metricNamespace)}, want ${wantScope}`);
        const operator = w.operator ?? 'GreaterThan';
        if (!METRIC_OPERATORS.includes(c.operator) || c.operator !== operator) problems.push(`${cw}: operator ${pattern(c.operator)}, want ${operator}`);
        const dims = Array.isArray(c.dimensions) ? c.dimensions : [];
        const filters = [...w.entities.length ? [{ name: 'EntityName', values: w.entities }] : [], ...w.dimension ? [w.dimension] : []];
        if (filters.length === 0 && dims.length !== 0) problems.push(`${cw}: want no dimension filter (the whole resource)`);
        for (const f of filters) {
          const d = dims.find((x) => x.name === f.name);
          const values = d && Array.isArray(d.values) ? d.values.map(resolve) : [];
          for (const v of f.values) {
            if (!values.includes(v) || d.operator !== 'Include') problems.push(`${cw}: ${f.name} values ${JSON.stringify(values)} must include ${v}`);
          }
        }
        checkThreshold(problems, cw, c.threshold, w.threshold, ctx);
      });
    } else if (rule.kind === 'activity') {
      if (String(body.location).toLowerCase() !== 'global') problems.push(`${where}: location ${pattern(body.location)}, want Global`);
      if (p.enabled !== true) problems.push(`${where}: enabled ${pattern(p.enabled)}, want true`);
      const types = (Array.isArray(p.scopes) ? p.scopes : []).map(scopeType);
      if (JSON.stringify([...types].sort()) !== JSON.stringify([...spec.scopes].sort())) {
        problems.push(`${where}: scopes are ${JSON.stringify(types)}, want one of each of ${JSON.stringify(spec.scopes)}`);
      }
      const allOf = at(p, 'condition.allOf');
      const leaves = Array.isArray(allOf) ? allOf : [];
      if (!leaves.some((l) => l.field === 'category' && l.equals === 'ResourceHealth')) problems.push(`${where}: condition must have category equals ResourceHealth`);
      const statuses = leaves.flatMap((l) => (Array.isArray(l.anyOf) ? l.anyOf : [l]))
        .filter((l) => l.field === 'properties.currentHealthStatus').map((l) => l.equals);
      for (const st of ['Degraded', 'Unavailable']) {
        if (!statuses.includes(st)) problems.push(`${where}: condition must match properties.currentHealthStatus ${st}`);
      }
      const groups = at(p, 'actions.actionGroups');
      const ags = Array.isArray(groups) ? groups : [];
      if (ags.length === 0) problems.push(`${where}: no action groups`);
      for (const a of ags) {
        if (!isExpr(a.actionGroupId, groupRef)) problems.push(`${where}: actionGroupId ${pattern(a.actionGroupId)}, want ${groupRef}`);
        if (pattern(at(a, 'webhookProperties.runbook')) !== link) {
          problems.push(`${where}: webhookProperties.runbook ${JSON.stringify(pattern(at(a, 'webhookProperties.runbook')))}, want ${link}`);
        }
      }
    } else {
      const actions = p.actions ?? {};
      const ags = Array.isArray(actions.actionGroups) ? actions.actionGroups : [];
      if (ags.length === 0 || !ags.every((g) => isExpr(g, groupRef))) problems.push(`${where}: actionGroups must be [${groupRef}]`);
      if (pattern(at(actions, 'customProperties.runbook')) !== link) {
        problems.push(`${where}: customProperties.runbook ${JSON.stringify(pattern(at(actions, 'customProperties.runbook')))}, want ${link}`);
      }
      if (body.kind !== 'LogAlert') problems.push(`${where}: kind ${pattern(body.kind)}, want LogAlert`);
      checkSchedule(problems, where, p);
      const allOf = at(p, 'criteria.allOf');
      if (!Array.isArray(allOf) || allOf.length !== 1) problems.push(`${where}: want exactly one criterion`);
      const c = Array.isArray(allOf) ? allOf[0] ?? {} : {};
      if (!LOG_TIME_AGGREGATIONS.includes(c.timeAggregation)) {
        problems.push(`${where}: timeAggregation ${pattern(c.timeAggregation)}, want one of ${LOG_TIME_AGGREGATIONS.join(', ')}`);
      } else if (c.timeAggregation !== spec.timeAggregation) {
        problems.push(`${where}: timeAggregation ${c.timeAggregation}, want ${spec.timeAggregation}`);
      }
      const query = resolve(c.query);
      const workspace = spec.scope === 'workspace';
      if (typeof query !== 'string') {
        problems.push(`${where}: query is not a literal string`);
      } else {
        for (const s of spec.mustQuery) if (!query.includes(s)) problems.push(`${where}: query must contain ${s}`);
        if (isWorkspaceQuery(query) !== workspace) {
          problems.push(`${where}: the query's first line must ${workspace ? '' : 'not '}be "${WORKSPACE_MARKER}..." (it picks the schema the KQL check uses)`);
        }
      }
      // Count counts rows; every other aggregation needs the column it
      // aggregates. A null column is not "absent": Bicep rejects null for a
      // string property, so the key must be left out.
      const measure = c.metricMeasureColumn;
      if (spec.measure === null) {
        if ('metricMeasureColumn' in c) problems.push(`${where}: metricMeasureColumn ${pattern(measure)}: a Count alert must not set it (not even to null)`);
      } else if (measure !== spec.measure) {
        problems.push(`${where}: metricMeasureColumn ${pattern(measure)}, want ${spec.measure}`);
      }
      const operator = spec.operator ?? 'GreaterThan';
      if (c.operator !== operator) problems.push(`${where}: operator ${pattern(c.operator)}, want ${operator}`);
      if (spec.windowSize && p.windowSize !== spec.windowSize) problems.push(`${where}: windowSize ${pattern(p.windowSize)}, want ${spec.windowSize}`);
      if (spec.dimensions) {
        const dims = (Array.isArray(c.dimensions) ? c.dimensions : []).map((d) => d.name);
        if (JSON.stringify(dims) !== JSON.stringify(spec.dimensions)) {
          problems.push(`${where}: dimensions ${JSON.stringify(dims)}, want ${JSON.stringify(spec.dimensions)} (one alert per source and reason)`);
        }
      }
      const scope = p.scopes?.[0];
      const wantScope = workspace ? WORKSPACES : COMPONENTS;
      if (scopeType(scope) !== wantScope) problems.push(`${where}: scope ${pattern(scope)} is not ${workspace ? 'the Log Analytics workspace' : 'Application Insights'}`);
      checkThreshold(problems, where, c.threshold, spec.threshold, ctx);
    }
  }
  return problems;
}

// Both durations are ISO 8601, and the rule is evaluated at least once per
// window (a frequency longer than the window would leave gaps unwatched).
function checkSchedule(problems, where, p) {
  const every = durationSeconds(p.evaluationFrequency);
  const window = durationSeconds(p.windowSize);
  if (!(every > 0) || !(window > 0)) {
    problems.push(`${where}: evaluationFrequency ${pattern(p.evaluationFrequency)} and windowSize ${pattern(p.windowSize)} must be ISO 8601 durations`);
  } else if (every > window) {
    problems.push(`${where}: evaluationFrequency ${p.evaluationFrequency} is longer than windowSize ${p.windowSize}`);
  }
}

// A threshold is a number, or a parameter of the alerts module with that name.
function checkThreshold(problems, where, got, want, ctx) {
  if (typeof want === 'number') {
    if (got !== want) problems.push(`${where}: threshold ${pattern(got)}, want ${want}`);
  } else if (!(isExpr(got, want) && got.ref?.kind === 'param' && ctx.file.params.has(want))) {
    problems.push(`${where}: threshold ${pattern(got)}, want the parameter ${want}`);
  }
}

/** The KQL of each log alert, resolved: name -> query text. */
export function logAlertQueries(project) {
  const out = {};
  for (const rule of alertRules(project)) {
    if (rule.kind !== 'log') continue;
    const q = project.resolve(rule.ctx, at(rule.body, 'properties.criteria.allOf')?.[0]?.query).value;
    if (typeof q === 'string') out[rule.name] = q;
  }
  return out;
}

/**
 * Checks the operations workbook resource: a shared workbook in the
 * 'workbook' gallery, attached to Application Insights, whose content is
 * alerts/workbook.json with its placeholders replaced. Returns
 * {problems, placeholders}: placeholders are the strings the Bicep replaces,
 * in order.
 */
export function checkWorkbook(project) {
  const problems = [];
  const placeholders = [];
  const workbooks = declared(project, 'Microsoft.Insights/workbooks');
  if (workbooks.length !== 1) return { problems: [`want one workbook, got ${workbooks.length}`], placeholders };
  const { ctx, resource } = workbooks[0];
  const body = resource.body;
  const p = body.properties ?? {};
  if (body.kind !== 'shared') problems.push(`workbook kind ${pattern(body.kind)}, want shared`);
  if (p.category !== 'workbook') problems.push(`workbook category ${pattern(p.category)}, want workbook`);
  if (typeof p.displayName !== 'string' || p.displayName === '') problems.push('workbook displayName: want a literal name');
  const source = p.sourceId;
  const m = source instanceof Expr ? /^(\w+)\.id$/.exec(source.text.replace(/\s+/g, '')) : null;
  if (ctx.file.resource(m?.[1])?.type !== 'Microsoft.Insights/components') {
    problems.push(`workbook sourceId ${pattern(source)}, want the id of the Application Insights component`);
  }

  // serializedData: replace(replace(loadTextContent('workbook.json'), '__A__', x), '__B__', y)
  const data = p.serializedData;
  let node = data instanceof Expr ? data.node : null;
  const fn = (n) => n?.type === 'call_expression' ? n.childForFieldName('function').text : null;
  const args = (n) => n.childForFieldName('arguments').namedChildren;
  while (fn(node) === 'replace' && args(node).length === 3) {
    const [inner, from] = args(node);
    const placeholder = ctx.file.value(from);
    if (typeof placeholder !== 'string') problems.push(`workbook serializedData: replace() of ${from.text}, want a literal placeholder`);
    else placeholders.unshift(placeholder);
    node = inner;
  }
  const loaded = fn(node) === 'loadTextContent' && args(node).length === 1 ? ctx.file.value(args(node)[0]) : null;
  if (loaded !== 'workbook.json') {
    problems.push(`workbook serializedData ${pattern(data)}: want loadTextContent('workbook.json'), optionally inside replace() calls`);
  }
  return { problems, placeholders };
}
