// Type-checks every resource body against the compact schema derived from
// the definitions the Bicep compiler uses (schema/azure-types.json, generated
// from Azure/bicep-types-az by schema/generate.mjs), as `bicep build` would:
// unknown property, wrong type, value outside an enum, read-only property
// set, required property missing. Values the reader cannot evaluate (a
// function of a resource's runtime properties, a ternary) are checked only as
// far as their type is known: a param by its declared type, an interpolated
// string as a string, a handful of functions by their result type.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Expr, Template, isPlainObject, repoRoot } from './bicep.mjs';
import { instantiate } from './alert-rules.mjs';

/** The committed compact schema. */
export function loadSchema() {
  return JSON.parse(readFileSync(path.join(repoRoot, 'infra/check/schema/azure-types.json'), 'utf8'));
}

// Keys of a resource body that are Bicep's, not the resource type's.
const BICEP_KEYS = new Set(['parent', 'scope', 'dependsOn']);

// Result types of the functions the templates call.
const FUNCTION_TYPES = {
  guid: 'string', uniqueString: 'string', toLower: 'string', toUpper: 'string', replace: 'string',
  subscriptionResourceId: 'string', resourceId: 'string', string: 'string', loadTextContent: 'string',
  format: 'string', substring: 'string', trim: 'string', empty: 'bool', contains: 'bool', length: 'int', int: 'int',
};

function kindOf(v, file) {
  if (v === null) return 'null';
  if (typeof v === 'string' || v instanceof Template) return 'string';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'number';
  if (typeof v === 'boolean') return 'bool';
  if (Array.isArray(v)) return 'array';
  if (isPlainObject(v)) return 'object';
  if (v instanceof Expr) {
    const text = v.text.replace(/\s+/g, '');
    if (v.ref?.kind === 'param' && /^\w+$/.test(text)) {
      return { string: 'string', int: 'int', bool: 'bool', object: 'object', array: 'array' }[file.params.get(text)?.type] ?? null;
    }
    if (v.type === 'call_expression') return FUNCTION_TYPES[v.node.childForFieldName('function')?.text] ?? null;
    const m = /^(\w+)\.(id|name)$/.exec(text);
    if (m && file.resource(m[1])) return 'string';
  }
  return null; // unknown: not checked
}

function show(v) {
  if (v instanceof Expr) return v.text;
  return JSON.stringify(v);
}

/**
 * Checks value v against compact type index idx; pushes problems as
 * "<where>: <path>: ...". existing: a reference to an existing resource, of
 * which only the keys are checked (nothing is required).
 */
function checkValue(ctx, v, idx, at, problems) {
  const { types, file, where } = ctx;
  const t = types[idx];
  const kind = kindOf(v, file);
  const say = (msg) => problems.push(`${where}: ${at || '(body)'}: ${msg}`);
  if (kind === null || t.t === 'any') return;
  switch (t.t) {
    case 'string':
      if (kind !== 'string') say(`${show(v)} is ${kind}, want string`);
      else if (typeof v === 'string' && t.maxLength !== undefined && v.length > t.maxLength) say(`${show(v)} is longer than ${t.maxLength}`);
      return;
    case 'int':
      if (kind !== 'int') say(`${show(v)} is ${kind}, want int`);
      else if (typeof v === 'number' && ((t.min !== undefined && v < t.min) || (t.max !== undefined && v > t.max))) say(`${v} is outside ${t.min ?? ''}..${t.max ?? ''}`);
      return;
    case 'bool':
    case 'null':
      if (kind !== t.t) say(`${show(v)} is ${kind}, want ${t.t}`);
      return;
    case 'lit':
      if (typeof v === 'string' && v !== t.v) say(`${show(v)}, want ${JSON.stringify(t.v)}`);
      else if (kind !== 'string') say(`${show(v)} is ${kind}, want ${JSON.stringify(t.v)}`);
      return;
    case 'union': {
      const members = t.of.map((i) => types[i]);
      const literals = members.filter((m) => m.t === 'lit').map((m) => m.v);
      // Most Azure enums are "extensible" ('a' | 'b' | string): Bicep takes
      // any string for them, Azure usually does not. A literal outside the
      // listed values fails here either way; the message says which kind.
      const open = members.some((m) => m.t === 'string');
      if (typeof v === 'string' && literals.length > 0 && members.every((m) => m.t === 'lit' || m.t === 'string')) {
        if (!literals.includes(v)) {
          say(`${show(v)} is not one of ${literals.map((l) => JSON.stringify(l)).join(', ')}${open ? ' (an extensible enum: Bicep accepts it, Azure may not)' : ''}`);
        }
        return;
      }
      // Accept when any member accepts.
      const tries = t.of.map((i) => {
        const p = [];
        checkValue(ctx, v, i, at, p);
        return p;
      });
      if (!tries.some((p) => p.length === 0)) {
        const best = tries.reduce((a, b) => (b.length < a.length ? b : a));
        problems.push(...best);
      }
      return;
    }
    case 'array':
      if (kind !== 'array') say(`${show(v)} is ${kind}, want array`);
      else if (Array.isArray(v)) v.forEach((item, i) => checkValue(ctx, item, t.item, `${at}[${i}]`, problems));
      return;
    case 'object':
    case 'disc': {
      if (kind !== 'object') {
        say(`${show(v)} is ${kind}, want object${t.name ? ` (${t.name})` : ''}`);
        return;
      }
      if (!isPlainObject(v)) return;
      let props = t.props;
      let additional = t.additional;
      if (t.t === 'disc') {
        const key = v[t.key];
        props = { ...t.base };
        if (typeof key !== 'string') {
          // Unknown variant: check only what every variant shares.
          additional = 0 - 1;
        } else if (!(key in t.elements)) {
          say(`${t.key} ${JSON.stringify(key)} is not one of ${Object.keys(t.elements).map((k) => JSON.stringify(k)).join(', ')}`);
          return;
        } else {
          const el = types[t.elements[key]];
          props = { ...props, ...el.props };
          additional = el.additional;
        }
      }
      for (const [k, val] of Object.entries(v)) {
        const path = at ? `${at}.${k}` : k;
        if (ctx.top && at === '' && BICEP_KEYS.has(k)) continue;
        const p = props[k];
        if (p) {
          if ((p[1] ?? '').includes('o')) say(`${path} is read-only`);
          else if (!ctx.existing) checkValue(ctx, val, p[0], path, problems);
        } else if (additional === -1) {
          continue;
        } else if (additional !== undefined) {
          if (!ctx.existing) checkValue(ctx, val, additional, path, problems);
        } else {
          const near = Object.keys(props).filter((n) => !(props[n][1] ?? '').includes('o'));
          say(`unknown property ${k}${t.name ? ` of ${t.name}` : ''} (known: ${near.join(', ')})`);
        }
      }
      if (!ctx.existing) {
        for (const [k, p] of Object.entries(props)) {
          if ((p[1] ?? '').includes('r') && !(p[1] ?? '').includes('o') && !(k in v)) say(`required property ${at ? `${at}.` : ''}${k} is missing`);
        }
      }
      return;
    }
    default:
      say(`unknown schema type ${t.t}`);
  }
}

/**
 * Problems of every resource declaration in the project against schema:
 * a type@version the schema lacks, and every body problem. A resource loop
 * over a literal list is checked once per item, with the item substituted.
 */
export function checkResourceSchemas(project, schema = loadSchema()) {
  const problems = [];
  const index = new Map(Object.entries(schema.resources).map(([k, v]) => [k.toLowerCase(), v]));
  for (const file of project.all()) {
    for (const r of file.resources) {
      const key = `${r.type}@${r.apiVersion}`;
      const entry = index.get(key.toLowerCase());
      const where = `${file.rel} resource ${r.symbol} (${key})`;
      if (!entry) {
        problems.push(`${where}: not in the compact schema (regenerate it: node infra/check/schema/generate.mjs)`);
        continue;
      }
      const bodies = r.loop && Array.isArray(r.loop.iterable)
        ? r.loop.iterable.map((item) => instantiate(r.body, r.loop.item, item))
        : [r.body];
      for (const body of bodies) {
        checkValue({ types: schema.types, file, where, existing: r.existing, top: true }, body, entry.body, '', problems);
      }
    }
  }
  return [...new Set(problems)];
}
