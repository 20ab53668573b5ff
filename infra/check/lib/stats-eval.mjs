// Runs a dead-letter alert's KQL over deadletter_stats lines, offline, as far
// as the alert's answer depends on the lines: the fields the query's extend
// reads from each line, its per-run summarize (each line counted once
// though the host writes it twice), then every `| where` after `stats`, in
// order. The rows left are the rows the alert counts (a Count alert with
// threshold 0 fires on any). The parse_json/extract plumbing is not
// evaluated here: the KQL analysis (lib/kql.mjs) and the mustQuery checks
// cover it. A query using anything outside this subset after `stats` is
// refused, so a change that could alter the answer cannot slip past.

/** The columns the query reads from the line: name -> line field. */
function extendedFields(query) {
  const out = new Map();
  for (const [, name, field] of query.matchAll(/(\w+) = coalesce\((?:tostring|tolong|todouble)\(s\.(\w+)\)/g)) out.set(name, field);
  return out;
}

/** The per-run summarize: [{name, agg, column}] and the by columns. */
function perRunSummarize(query) {
  const m = /\| summarize (.+) by ([\w, ]+);/.exec(query);
  if (!m) throw new Error('no per-run "| summarize ... by ...;" in the query');
  const aggs = m[1].split(/,\s*/).map((a) => {
    const am = /^(\w+) = (min|max)\((\w+)\)$/.exec(a.trim());
    if (!am) throw new Error(`per-run summarize: ${a}: only name = min(col) or max(col) are evaluated`);
    return { name: am[1], agg: am[2], column: am[3] };
  });
  return { aggs, by: m[2].split(/,\s*/).map((s) => s.trim()) };
}

/** Tokens of a where predicate. */
function tokenize(expr) {
  const tokens = [];
  const re = /\s*(?:(\d+(?:\.\d+)?)|"((?:[^"\\]|\\.)*)"|(>=|<=|==|!=|>|<|\(|\)|,)|([A-Za-z_]\w*))/y;
  let pos = 0;
  while (pos < expr.length) {
    re.lastIndex = pos;
    const m = re.exec(expr);
    if (!m || m[0].length === 0) {
      if (/^\s*$/.test(expr.slice(pos))) break;
      throw new Error(`where ${expr}: cannot read ${JSON.stringify(expr.slice(pos))}`);
    }
    pos = re.lastIndex;
    if (m[1] !== undefined) tokens.push({ kind: 'value', value: Number(m[1]) });
    else if (m[2] !== undefined) tokens.push({ kind: 'value', value: m[2] });
    else if (m[3] !== undefined) tokens.push({ kind: 'op', value: m[3] });
    else tokens.push({ kind: ['and', 'or', 'in'].includes(m[4]) ? 'op' : 'name', value: m[4] });
  }
  return tokens;
}

/**
 * Compiles a where predicate of comparisons (== != > < >= <=, `in (...)`)
 * between a column and literals, joined by and/or with parentheses, into a
 * function of a row. A comparison with a null column is false, as in KQL.
 */
export function compilePredicate(expr) {
  const tokens = tokenize(expr);
  let i = 0;
  const peek = () => tokens[i];
  const take = (value) => {
    const t = tokens[i];
    if (!t || (value !== undefined && t.value !== value)) throw new Error(`where ${expr}: want ${value ?? 'more'} at token ${i}`);
    i++;
    return t;
  };
  const comparison = () => {
    if (peek()?.value === '(') {
      take('(');
      const e = disjunction();
      take(')');
      return e;
    }
    const column = take();
    if (column.kind !== 'name') throw new Error(`where ${expr}: want a column, got ${column.value}`);
    const op = take();
    if (op.value === 'in') {
      take('(');
      const values = [];
      for (;;) {
        const v = take();
        if (v.kind !== 'value') throw new Error(`where ${expr}: in (...) takes literals`);
        values.push(v.value);
        if (peek()?.value === ',') take(',');
        else break;
      }
      take(')');
      return (row) => row[column.value] != null && values.includes(row[column.value]);
    }
    const v = take();
    if (v.kind !== 'value') throw new Error(`where ${expr}: compare ${column.value} with a literal`);
    const cmp = { '==': (a, b) => a === b, '!=': (a, b) => a !== b, '>': (a, b) => a > b, '<': (a, b) => a < b, '>=': (a, b) => a >= b, '<=': (a, b) => a <= b }[op.value];
    if (!cmp) throw new Error(`where ${expr}: operator ${op.value} is not evaluated`);
    return (row) => row[column.value] != null && cmp(row[column.value], v.value);
  };
  const conjunction = () => {
    let left = comparison();
    while (peek()?.value === 'and') {
      take('and');
      const l = left;
      const r = comparison();
      left = (row) => l(row) && r(row);
    }
    return left;
  };
  function disjunction() {
    let left = conjunction();
    while (peek()?.value === 'or') {
      take('or');
      const l = left;
      const r = conjunction();
      left = (row) => l(row) || r(row);
    }
    return left;
  }
  const f = disjunction();
  if (i !== tokens.length) throw new Error(`where ${expr}: unexpected ${tokens[i].value}`);
  return f;
}

/**
 * The rows a deadletter_stats count query leaves from lines (the JSON
 * objects the sweeper logs, each as often as it reached Application
 * Insights), before its final summarize and project.
 */
export function statsRows(query, lines) {
  const fields = extendedFields(query);
  const { aggs, by } = perRunSummarize(query);
  const groups = new Map();
  for (const line of lines) {
    if (line.msg !== 'deadletter_stats') continue;
    const row = { timestamp: line.time };
    for (const [name, field] of fields) row[name] = line[field] ?? null;
    const key = JSON.stringify(by.map((b) => row[b]));
    const g = groups.get(key) ?? Object.fromEntries(by.map((b) => [b, row[b]]));
    for (const { name, agg, column } of aggs) {
      const v = row[column];
      if (v == null) {
        if (!(name in g)) g[name] = null;
        continue;
      }
      g[name] = g[name] == null ? v : agg === 'max' ? (v > g[name] ? v : g[name]) : (v < g[name] ? v : g[name]);
    }
    groups.set(key, g);
  }
  let rows = [...groups.values()];
  const after = query.split('\n');
  const start = after.findIndex((l) => l.trim() === 'stats');
  if (start < 0) throw new Error('no "stats" line after the let');
  for (const l of after.slice(start + 1)) {
    const t = l.trim();
    if (t === '') continue;
    const w = /^\| where (.+)$/.exec(t);
    if (w) {
      rows = rows.filter(compilePredicate(w[1]));
      continue;
    }
    if (/^\| (summarize .* by [\w, ]+|project [\w, ]+)$/.test(t)) continue; // regroups and renames, filters nothing
    throw new Error(`after stats: ${t} is not evaluated (only where, summarize ... by and project are)`);
  }
  return rows;
}
