// The invariants of alerts/: which alerts exist, what each one watches, and
// that every alert carries its runbook link. Alerts may be declared one
// resource each or, as alerts.bicep does, as a resource loop over a list of
// specs; either way they are read back as one record per alert.

import { Expr, Template, isExpr, isPlainObject } from './bicep.mjs';
import { at, declared, QUEUE_NAMES } from './infra-rules.mjs';

/**
 * The alerts the issue asks for. metric: Service Bus namespace metric alerts
 * (entities: the EntityName values the alert must include, [] for the whole
 * namespace). log: scheduled query rules on Application Insights
 * (mustQuery: text the KQL must contain).
 */
export const EXPECTED_ALERTS = {
  'order-status-dead-lettered': {
    kind: 'metric', metricName: 'DeadletteredMessages', entities: [QUEUE_NAMES.orderStatus], threshold: 0,
  },
  'order-status-poison-parked': {
    kind: 'metric', metricName: 'ActiveMessages', entities: [QUEUE_NAMES.poison], threshold: 0,
  },
  'order-status-backlog': {
    kind: 'metric', metricName: 'ActiveMessages', entities: [QUEUE_NAMES.orderStatus], threshold: 'backlogThreshold',
  },
  'service-bus-server-errors': { kind: 'metric', metricName: 'ServerErrors', entities: [], threshold: 0 },
  'service-bus-throttled-requests': { kind: 'metric', metricName: 'ThrottledRequests', entities: [], threshold: 0 },
  'dead-letter-oldest-age': {
    kind: 'log',
    mustQuery: ['traces', 'deadletter_stats', 'parse_json', 'oldest_age_seconds', 'source', 'reason'],
    measure: 'oldest_age_seconds',
    threshold: 'deadLetterAgeThresholdSeconds',
  },
  'order-status-failed-invocations': {
    kind: 'log',
    mustQuery: ['requests', 'operation_Name == "OrderStatus"', 'success == false'],
    measure: null,
    threshold: 'failedInvocationsThreshold',
  },
};

// Replaces <item>.<field> references (the loop variable) with the spec's
// values, in Exprs and inside string templates.
function instantiate(value, item, spec) {
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
  const kinds = { 'Microsoft.Insights/metricAlerts': 'metric', 'Microsoft.Insights/scheduledQueryRules': 'log' };
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
    if (rule.kind !== spec.kind) problems.push(`${where}: kind ${rule.kind}, want ${spec.kind}`);
    if (!String(pattern(p.description)).endsWith(`Runbook: ${link}`)) {
      problems.push(`${where}: description ${JSON.stringify(pattern(p.description))} must end with "Runbook: ${link}"`);
    }
    const resolve = (v) => project.resolve(ctx, v).value;

    if (rule.kind === 'metric') {
      const actions = Array.isArray(p.actions) ? p.actions : [];
      if (actions.length === 0) problems.push(`${where}: no actions`);
      for (const a of actions) {
        if (!isExpr(a.actionGroupId, groupRef)) problems.push(`${where}: actionGroupId ${pattern(a.actionGroupId)}, want ${groupRef}`);
        if (pattern(at(a, 'webHookProperties.runbook')) !== link) {
          problems.push(`${where}: webHookProperties.runbook ${JSON.stringify(pattern(at(a, 'webHookProperties.runbook')))}, want ${link}`);
        }
      }
      const c = at(p, 'criteria.allOf')?.[0] ?? {};
      if (c.metricName !== spec.metricName) problems.push(`${where}: metricName ${pattern(c.metricName)}, want ${spec.metricName}`);
      if (c.metricNamespace !== 'Microsoft.ServiceBus/namespaces') problems.push(`${where}: metricNamespace ${pattern(c.metricNamespace)}`);
      if (c.operator !== 'GreaterThan') problems.push(`${where}: operator ${pattern(c.operator)}, want GreaterThan`);
      const scope = p.scopes?.[0];
      const scopeRes = scope instanceof Expr && scope.ref?.kind === 'resource' ? ctx.file.resource(scope.ref.name) : null;
      if (scopeRes?.type !== 'Microsoft.ServiceBus/namespaces') problems.push(`${where}: scope ${pattern(scope)} is not the Service Bus namespace`);
      const dims = Array.isArray(c.dimensions) ? c.dimensions : [];
      const entity = dims.find((d) => d.name === 'EntityName');
      const values = entity && Array.isArray(entity.values) ? entity.values.map(resolve) : [];
      if (spec.entities.length === 0 && dims.length !== 0) problems.push(`${where}: want no dimension filter (whole namespace)`);
      for (const e of spec.entities) {
        if (!values.includes(e) || entity.operator !== 'Include') problems.push(`${where}: EntityName values ${JSON.stringify(values)} must include ${e}`);
      }
      checkThreshold(problems, where, c.threshold, spec.threshold, ctx);
    } else {
      const actions = p.actions ?? {};
      const ags = Array.isArray(actions.actionGroups) ? actions.actionGroups : [];
      if (ags.length === 0 || !ags.every((g) => isExpr(g, groupRef))) problems.push(`${where}: actionGroups must be [${groupRef}]`);
      if (pattern(at(actions, 'customProperties.runbook')) !== link) {
        problems.push(`${where}: customProperties.runbook ${JSON.stringify(pattern(at(actions, 'customProperties.runbook')))}, want ${link}`);
      }
      const c = at(p, 'criteria.allOf')?.[0] ?? {};
      const query = resolve(c.query);
      if (typeof query !== 'string') {
        problems.push(`${where}: query is not a literal string`);
      } else {
        for (const s of spec.mustQuery) if (!query.includes(s)) problems.push(`${where}: query must contain ${s}`);
      }
      const measure = c.metricMeasureColumn;
      if (spec.measure && measure !== spec.measure) problems.push(`${where}: metricMeasureColumn ${pattern(measure)}, want ${spec.measure}`);
      if (c.operator !== 'GreaterThan') problems.push(`${where}: operator ${pattern(c.operator)}, want GreaterThan`);
      const scope = p.scopes?.[0];
      const scopeRes = scope instanceof Expr && scope.ref?.kind === 'resource' ? ctx.file.resource(scope.ref.name) : null;
      if (scopeRes?.type !== 'Microsoft.Insights/components') problems.push(`${where}: scope ${pattern(scope)} is not Application Insights`);
      checkThreshold(problems, where, c.threshold, spec.threshold, ctx);
    }
  }
  return problems;
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
