// One default per knob: what docs/deploy.md's parameter table says, what
// infra/main.bicep declares (and what main.parameters.json makes azd use),
// what each module declares for the same parameter, and, for a parameter
// that becomes an app setting the handler reads, the handler's own default
// in handler/internal/config/config.go (read as text). Each check returns
// problems, empty when every pair agrees.

import { Expr } from './bicep.mjs';
import { functionAppSettings, handlerEnvNames } from './infra-rules.mjs';

/**
 * Rows of docs/deploy.md whose default cell describes who sets the value
 * instead of giving one, each with the text the cell must contain and why.
 * Every other row gives a literal default, "empty" or "placeholder `...`".
 */
export const DESCRIBED_DEFAULTS = {
  environmentName: ['azd asks', 'no default: azd prompts for the environment name'],
  location: ['azd asks', 'no default: azd prompts for the region'],
  principalId: ['azd sets', 'azd fills AZURE_PRINCIPAL_ID with the signed-in principal'],
  principalType: ['set by the preflight', 'scripts/azd-preflight.sh sets AZURE_PRINCIPAL_TYPE from az account show'],
};

/** The rows of the "## Parameters" table of docs/deploy.md: [{param, variable, cell}]. */
export function deployParameterRows(markdown) {
  const start = markdown.indexOf('\n## Parameters');
  if (start < 0) return [];
  const end = markdown.indexOf('\n## ', start + 1);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  const rows = [];
  for (const line of section.split('\n')) {
    const m = /^\| `(\w+)` \|([^|]*)\|([^|]*)\|/.exec(line);
    if (!m) continue;
    rows.push({ param: m[1], variable: /`([A-Z_]+)`/.exec(m[2])?.[1] ?? '', cell: m[3].trim() });
  }
  return rows;
}

/** A default cell read: {kind: 'value'|'empty'|'placeholder'|'described', value}. */
export function docDefault(cell) {
  let m;
  if ((m = /^`([^`]*)`/.exec(cell))) return { kind: 'value', value: m[1] };
  if (/^empty\b/.test(cell)) return { kind: 'empty' };
  if ((m = /^placeholder `([^`]+)`/.exec(cell))) return { kind: 'placeholder', value: m[1] };
  return { kind: 'described', value: cell };
}

/** A literal default as the docs write it; undefined without a default, null for an expression. */
function literal(v) {
  if (v === undefined) return undefined;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  return null;
}

/** `${VAR}` or `${VAR=default}` of main.parameters.json: {variable, dflt}. */
function azdReference(value) {
  const m = /^\$\{([A-Z_]+)(?:=([^}]*))?\}$/.exec(String(value ?? ''));
  return m ? { variable: m[1], dflt: m[2] } : null;
}

/**
 * docs/deploy.md's parameter table against infra/main.bicep and
 * infra/main.parameters.json: a row per parameter and a parameter per row,
 * the azd variable main.parameters.json maps, and the default, which must
 * equal the Bicep default and the `${VAR=default}` azd uses.
 */
export function checkDeployDefaults(project, { deployMd, parametersJson }) {
  const problems = [];
  const main = project.get('infra/main.bicep');
  const params = JSON.parse(parametersJson).parameters;
  const rows = deployParameterRows(deployMd);
  if (rows.length < 10) return [`docs/deploy.md: found ${rows.length} rows in the Parameters table; has it moved?`];
  const byName = new Map(rows.map((r) => [r.param, r]));
  for (const r of rows) if (!main.params.has(r.param)) problems.push(`docs/deploy.md names the parameter ${r.param}, which infra/main.bicep does not declare`);
  for (const [name] of main.params) {
    const row = byName.get(name);
    if (!row) {
      problems.push(`docs/deploy.md: the Parameters table has no row for ${name} (infra/main.bicep)`);
      continue;
    }
    const where = `docs/deploy.md ${name}`;
    const bicep = literal(main.paramDefault(name));
    const azd = azdReference(params[name]?.value);
    if (row.variable !== (azd?.variable ?? '')) {
      problems.push(`${where}: azd variable ${row.variable || '(none)'}, main.parameters.json maps ${azd?.variable || 'none'}`);
    }
    if (azd?.dflt !== undefined && bicep !== undefined && azd.dflt !== bicep) {
      problems.push(`infra/main.parameters.json ${name}: azd default ${azd.dflt}, infra/main.bicep default ${bicep}`);
    }
    const doc = docDefault(row.cell);
    if (doc.kind === 'described') {
      const want = DESCRIBED_DEFAULTS[name];
      if (!want) problems.push(`${where}: default "${row.cell}" gives no value; want \`${bicep}\` (infra/main.bicep)`);
      else if (!row.cell.includes(want[0])) problems.push(`${where}: default "${row.cell}", want it to say "${want[0]}" (${want[1]})`);
    } else if (doc.kind === 'empty') {
      if (bicep !== '') problems.push(`${where}: default empty, infra/main.bicep ${bicep === undefined ? 'has none' : bicep}`);
    } else if (doc.kind === 'placeholder') {
      const substituted = [...main.vars.keys()].some((v) => main.variable(v) === doc.value);
      if (bicep !== '' || !substituted) problems.push(`${where}: placeholder ${doc.value}, want an empty default and a variable of infra/main.bicep with that value`);
    } else if (doc.value !== bicep) {
      problems.push(`${where}: default ${doc.value}, infra/main.bicep ${bicep === undefined ? 'has none' : bicep}`);
    }
  }
  return problems;
}

/**
 * Every module parameter main.bicep passes one of its own parameters to has
 * the same default as that parameter (or none), so a module read alone
 * tells no other story.
 */
export function checkModuleDefaults(project) {
  const problems = [];
  let pairs = 0;
  for (const [rel, ctx] of project.contexts()) {
    if (!ctx.caller) continue;
    for (const [arg, value] of Object.entries(ctx.args ?? {})) {
      if (!(value instanceof Expr && value.ref?.kind === 'param' && /^\w+$/.test(value.text))) continue;
      if (!ctx.file.params.get(arg)?.defaultNode || !ctx.caller.file.params.get(value.text)?.defaultNode) continue;
      pairs++;
      const mine = JSON.stringify(ctx.file.paramDefault(arg));
      const theirs = JSON.stringify(ctx.caller.file.paramDefault(value.text));
      if (mine !== theirs) problems.push(`${rel} param ${arg} defaults to ${mine}, ${ctx.caller.file.rel} passes ${value.text}, which defaults to ${theirs}`);
    }
  }
  if (pairs < 10) problems.push(`found only ${pairs} module parameters with a default passed from main.bicep; has the wiring moved?`);
  return problems;
}

/** Seconds in a Go duration string such as 5s, 10m, 1h30m or 720h; NaN if it is not one. */
export function goDurationSeconds(text) {
  const s = String(text);
  if (!/^(\d+(\.\d+)?(h|m|s|ms))+$/.test(s)) return NaN;
  const unit = { h: 3600, m: 60, s: 1, ms: 0.001 };
  return [...s.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)].reduce((t, [, n, u]) => t + Number(n) * unit[u], 0);
}

const GO_UNITS = { Nanosecond: 1e-9, Microsecond: 1e-6, Millisecond: 1e-3, Second: 1, Minute: 60, Hour: 3600 };

/**
 * The default config.go gives the setting of constant envConst, read from
 * its text: the Default* constant of `get(EnvX, DefaultY)`, or else the
 * first value assigned to the field a `get(EnvX, "")` sets, evaluated:
 * {duration: seconds}, {value: string}, or null when it cannot be read.
 */
export function goDefault(configGo, envConst) {
  let expr = new RegExp(`get\\(${envConst},\\s*(Default\\w+)\\)`).exec(configGo)?.[1];
  // duration(get, EnvX, &v.Field, ...): the default is what v.Field holds before,
  // first assigned (v.Field = DefaultX) or in v's composite literal (Field: DefaultX).
  const dur = new RegExp(`duration\\(get, ${envConst}, &(\\w+)\\.(\\w+),`).exec(configGo);
  if (!expr && dur) {
    const fn = configGo.lastIndexOf('\nfunc ', dur.index);
    const before = configGo.slice(fn, dur.index);
    const assigned = new RegExp(`\\b${dur[1]}\\.${dur[2]} = ([\\w.]+)`).exec(before)?.[1];
    expr = assigned ?? new RegExp(`\\b${dur[2]}:\\s*(Default\\w+)`).exec(before)?.[1];
    if (!expr) return null;
  }
  if (!expr) {
    const at = configGo.indexOf(`get(${envConst}, "")`);
    if (at < 0) return null;
    const field = /\bc\.(\w+)/.exec(configGo.slice(at))?.[1];
    const fn = configGo.lastIndexOf('\nfunc ', at);
    expr = field && new RegExp(`c\\.${field} = ([\\w.]+)`).exec(configGo.slice(fn, at))?.[1];
    if (!expr) return null;
  }
  let m;
  if ((m = /^slog\.Level(\w+)$/.exec(expr))) return { value: m[1].toLowerCase() };
  const def = new RegExp(`^\\s*${expr}\\s*=\\s*(.+?)\\s*(//.*)?$`, 'm').exec(configGo)?.[1];
  if (def === undefined) return null;
  if ((m = /^"([^"]*)"$/.exec(def))) return { value: m[1] };
  if (/^\d+(\.\d+)?$/.test(def)) return { value: String(Number(def)) };
  const factors = def.split(/\s*\*\s*/);
  const unit = /^time\.(\w+)$/.exec(factors.at(-1))?.[1];
  if (unit in GO_UNITS && factors.slice(0, -1).every((f) => /^\d+$/.test(f))) {
    return { duration: factors.slice(0, -1).reduce((t, f) => t * Number(f), 1) * GO_UNITS[unit] };
  }
  return null;
}

/**
 * For every app setting config.go reads whose value on the function app is
 * a parameter of main.bicep (through the module call), main.bicep's default
 * equals config.go's default. Returns {problems, pairs: [setting, ...]}.
 */
export function checkGoDefaults(project, configGo) {
  const problems = [];
  const pairs = [];
  const app = functionAppSettings(project);
  if (!app) return { problems: ['want one function app with a literal appsettings object'], pairs };
  const consts = new Map([...configGo.matchAll(/^\s*(Env\w+)\s*=\s*"([^"]+)"/gm)].map((m) => [m[2], m[1]]));
  const read = new Set(handlerEnvNames(configGo));
  for (const [setting, value] of Object.entries(app.settings)) {
    if (!read.has(setting)) continue;
    let v = value;
    let ctx = app.ctx;
    while (v instanceof Expr && v.ref?.kind === 'param' && /^\w+$/.test(v.text) && ctx.caller && ctx.args && v.text in ctx.args) {
      v = ctx.args[v.text];
      ctx = ctx.caller;
    }
    if (!(v instanceof Expr && v.ref?.kind === 'param' && ctx.caller === null)) continue;
    pairs.push(setting);
    const bicep = literal(ctx.file.paramDefault(v.text));
    const go = goDefault(configGo, consts.get(setting));
    const where = `app setting ${setting}: infra/main.bicep param ${v.text} defaults to ${bicep}`;
    if (go === null) problems.push(`${where}; cannot read config.go's default for ${consts.get(setting)}: update goDefault`);
    else if ('duration' in go) {
      if (goDurationSeconds(bicep) !== go.duration) problems.push(`${where}, handler/internal/config/config.go to ${go.duration}s`);
    } else if (go.value !== bicep) problems.push(`${where}, handler/internal/config/config.go to ${go.value}`);
  }
  return { problems, pairs };
}
