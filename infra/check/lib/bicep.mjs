// Package-free reader for Bicep files, built on the tree-sitter-bicep grammar
// (loaded through web-tree-sitter from tools/node_modules).
//
// It gives the offline checks two things:
//   - syntaxErrors: every ERROR and MISSING node of a parse, with positions;
//   - readBicep: the declarations of a file (params, vars, resources, modules,
//     outputs) with their values evaluated as far as literals allow. Strings,
//     numbers, booleans, null, objects and arrays become plain JavaScript
//     values; references to variables are followed; anything else (a param, a
//     function call, a member of a resource) stays an Expr that keeps its
//     source text and, for identifiers, what it refers to.
//
// It is a reader for checks, not a compiler: it does not type-check, resolve
// modules or evaluate functions. A real `bicep build` does that.

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** Absolute path of the repository root (infra/check/lib/ is three levels down). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

// The npm packages live in tools/node_modules (make tools), not next to this file.
const requireTools = createRequire(path.join(repoRoot, 'tools', 'package.json'));

let parserPromise;

/** Returns a tree-sitter parser for Bicep; the WASM grammar loads once per process. */
export function bicepParser() {
  parserPromise ??= (async () => {
    const Parser = requireTools('web-tree-sitter');
    await Parser.init();
    const language = await Parser.Language.load(
      requireTools.resolve('tree-sitter-bicep/tree-sitter-bicep.wasm'),
    );
    const parser = new Parser();
    parser.setLanguage(language);
    return parser;
  })();
  return parserPromise;
}

/** Parses Bicep source text and returns the tree-sitter tree. */
export async function parseBicep(source) {
  const parser = await bicepParser();
  return parser.parse(source);
}

/**
 * Lists the ERROR and MISSING nodes of a tree as
 * {kind, line, column, text} (1-based line and column).
 */
export function syntaxErrors(tree) {
  const found = [];
  const visit = (node) => {
    if (node.isMissing || node.type === 'ERROR') {
      found.push({
        kind: node.isMissing ? 'MISSING' : 'ERROR',
        line: node.startPosition.row + 1,
        column: node.startPosition.column + 1,
        text: node.isMissing ? node.type : node.text.slice(0, 60),
      });
    }
    if (node.hasError || node.isMissing) {
      for (const child of node.children) visit(child);
    }
  };
  visit(tree.rootNode);
  return found;
}

/**
 * An expression the reader does not evaluate. text is its source; ref, when
 * the expression is a bare identifier or starts with one, names what it refers
 * to: {kind: 'param'|'resource'|'module'|'unknown', name} (a loop variable
 * is 'unknown').
 */
export class Expr {
  constructor(node, ref = null) {
    this.text = node.text;
    this.type = node.type;
    this.ref = ref;
    // The syntax node, kept out of enumeration so values print readably.
    Object.defineProperty(this, 'node', { value: node, enumerable: false });
  }

  toString() {
    return this.text;
  }
}

/** Reports whether v is an Expr whose source text equals text (whitespace-insensitive). */
export function isExpr(v, text) {
  return v instanceof Expr && (text === undefined || squash(v.text) === squash(text));
}

function squash(s) {
  return s.replace(/\s+/g, '');
}

/** The value of a string node without interpolations, or null if it has any. */
function literalString(node) {
  let out = '';
  for (const piece of stringPieces(node)) {
    if (piece.type === 'interpolation') return null;
    out += piece.escape ? unescape(piece.text) : piece.text;
  }
  return out;
}

// The pieces of a string node between its quotes: {type, text, escape, node}.
// The grammar drops some text: escapes like \$ are hidden tokens that leave
// no node (recovered from the source between the nodes around them), and the
// whitespace before ${ is folded into the interpolation node.
function stringPieces(node) {
  const source = node.text;
  const base = node.startIndex;
  const pieces = [];
  let pos = null;
  for (const child of node.children) {
    if (pos !== null && child.startIndex > pos) {
      const gap = source.slice(pos - base, child.startIndex - base);
      pieces.push({ type: 'string_content', text: gap.replace(/\\(u\{[0-9a-fA-F]+\}|.)/gs, (e) => unescape(e)), escape: false });
    }
    pos = child.endIndex;
    if (child.type === "'" || child.type === "'''") continue;
    if (child.type === 'interpolation') {
      // Whitespace before ${ can end up inside the interpolation node.
      const lead = child.text.slice(0, child.text.indexOf('${'));
      if (lead) pieces.push({ type: 'string_content', text: lead, escape: false });
    }
    pieces.push({ type: child.type, text: child.text, escape: child.type === 'escape_sequence', node: child });
  }
  return pieces;
}

function unescape(seq) {
  const map = { n: '\n', r: '\r', t: '\t', '\\': '\\', "'": "'", $: '$' };
  const c = seq.slice(1);
  if (c in map) return map[c];
  if (c.startsWith('u{')) return String.fromCodePoint(parseInt(c.slice(2, -1), 16));
  return c;
}

/**
 * A string with interpolations, kept as its parts: literal strings and Exprs.
 * text is the source, e.g. '${runbookBaseUrl}/x.md'.
 */
export class Template extends Expr {
  constructor(node, parts) {
    super(node);
    this.parts = parts;
  }

  /** The literal text with every interpolation written as ${source}. */
  get pattern() {
    return this.parts.map((p) => (typeof p === 'string' ? p : '${' + p.text + '}')).join('');
  }
}

/**
 * Reads one Bicep file (or source text given for it). The result holds the
 * tree, syntax errors and the declarations; values are evaluated lazily.
 */
export async function readBicep(file, source = readFileSync(file, 'utf8')) {
  const tree = await parseBicep(source);
  return new BicepFile(file, source, tree);
}

/** The declarations of one parsed Bicep file. */
export class BicepFile {
  constructor(file, source, tree) {
    this.file = file;
    this.source = source;
    this.tree = tree;
    this.errors = syntaxErrors(tree);
    this.targetScope = 'resourceGroup';
    this.params = new Map();
    this.vars = new Map();
    this.resources = [];
    this.modules = [];
    this.outputs = new Map();
    this.#collect();
  }

  #varCache = new Map();

  #collect() {
    let pending = [];
    for (const stmt of this.tree.rootNode.namedChildren) {
      if (stmt.type === 'decorators') {
        pending = stmt.namedChildren;
        continue;
      }
      const decorators = this.#decorators(pending);
      pending = [];
      switch (stmt.type) {
        case 'target_scope_assignment':
          this.targetScope = literalString(stmt.namedChildren[0]);
          break;
        case 'parameter_declaration': {
          const [id, type, value] = stmt.namedChildren;
          this.params.set(id.text, { name: id.text, type: type.text, decorators, defaultNode: value ?? null });
          break;
        }
        case 'variable_declaration': {
          const [id, value] = stmt.namedChildren;
          this.vars.set(id.text, value);
          break;
        }
        case 'resource_declaration':
          this.#resource(stmt, decorators, null);
          break;
        case 'module_declaration': {
          const [id, pathNode, body] = stmt.namedChildren;
          // Object.assign keeps #shape's lazy body getter (a spread would call it now).
          this.modules.push(Object.assign(this.#shape(body), {
            symbol: id.text,
            path: literalString(pathNode),
            decorators,
          }));
          break;
        }
        case 'output_declaration': {
          const [id, type, value] = stmt.namedChildren;
          this.outputs.set(id.text, { name: id.text, type: type.text, node: value });
          break;
        }
        default:
          break;
      }
    }
  }

  #decorators(nodes) {
    const out = {};
    for (const d of nodes) {
      const call = d.namedChildren[0];
      const fn = call.childForFieldName('function');
      const args = call.childForFieldName('arguments');
      out[fn.text] = args.namedChildren.map((a) => this.value(a));
    }
    return out;
  }

  // Splits a resource or module body into condition, loop and object. The
  // body and the loop's iterable are evaluated when read, so a declaration may
  // use variables declared after it.
  #shape(body) {
    const file = this;
    let condition = null;
    let loop = null;
    let object = body;
    if (body.type === 'for_statement') {
      const named = body.namedChildren.filter((n) => n.type !== 'comment');
      const bodyNode = body.childForFieldName('body');
      const params = named.find((n) => n.type === 'for_loop_parameters');
      const initializer = body.childForFieldName('initializer');
      const iterableNode = named.find(
        (n) => !n.equals(bodyNode) && !(params && n.equals(params)) && !(initializer && n.equals(initializer)),
      );
      loop = {
        item: initializer ? initializer.text : params?.namedChildren[0]?.text ?? null,
        index: params ? params.namedChildren[1]?.text ?? null : null,
        get iterable() {
          return file.value(iterableNode);
        },
      };
      object = bodyNode;
    }
    if (object.type === 'if_statement') {
      const [cond, obj] = object.namedChildren;
      condition = new Expr(cond);
      object = obj;
    }
    return {
      condition,
      loop,
      node: object,
      get body() {
        return file.value(object);
      },
    };
  }

  #resource(stmt, decorators, parent) {
    const named = stmt.namedChildren;
    const id = named[0];
    const typeNode = named[1];
    const bodyNode = named[named.length - 1];
    const typeText = literalString(typeNode);
    const [rawType, apiVersion = null] = typeText.split('@');
    const existing = stmt.children.some((c) => c.type === 'existing');
    const type = parent && !rawType.includes('/') ? `${parent.type}/${rawType}` : rawType;
    const resource = Object.assign(this.#shape(bodyNode), {
      symbol: id.text,
      type,
      apiVersion: apiVersion ?? parent?.apiVersion ?? null,
      existing,
      decorators,
      nestedIn: parent?.symbol ?? null,
    });
    this.resources.push(resource);
    for (const prop of resource.node.namedChildren) {
      const inner = prop.namedChildren[0];
      if (prop.type === 'object_property' && inner?.type === 'resource_declaration') {
        this.#resource(inner, {}, resource);
      }
    }
  }

  /** The resource declared with this symbol, or undefined. */
  resource(symbol) {
    return this.resources.find((r) => r.symbol === symbol);
  }

  /** Every resource whose type (without API version) equals type. */
  resourcesOfType(type) {
    return this.resources.filter((r) => r.type.toLowerCase() === type.toLowerCase());
  }

  /** The module declared with this symbol, or undefined. */
  module(symbol) {
    return this.modules.find((m) => m.symbol === symbol);
  }

  /** The evaluated value of variable name (see value). */
  variable(name) {
    if (!this.vars.has(name)) throw new Error(`${this.file}: no variable ${name}`);
    if (!this.#varCache.has(name)) {
      this.#varCache.set(name, undefined); // guards against cycles
      this.#varCache.set(name, this.value(this.vars.get(name)));
    }
    return this.#varCache.get(name);
  }

  /** The evaluated default of param name, or undefined when it has none. */
  paramDefault(name) {
    const param = this.params.get(name);
    if (!param) throw new Error(`${this.file}: no param ${name}`);
    return param.defaultNode === null ? undefined : this.value(param.defaultNode);
  }

  /** The evaluated value of output name. */
  output(name) {
    const out = this.outputs.get(name);
    if (!out) throw new Error(`${this.file}: no output ${name}`);
    return this.value(out.node);
  }

  /** What a bare identifier refers to in this file. */
  refOf(name) {
    if (this.params.has(name)) return { kind: 'param', name };
    if (this.vars.has(name)) return { kind: 'var', name };
    if (this.resources.some((r) => r.symbol === name)) return { kind: 'resource', name };
    if (this.modules.some((m) => m.symbol === name)) return { kind: 'module', name };
    return { kind: 'unknown', name };
  }

  /**
   * Evaluates a syntax node: literals become JavaScript values, variables are
   * followed (including members and indexes of variable objects and arrays),
   * and every other expression becomes an Expr.
   */
  value(node) {
    switch (node.type) {
      case 'expression':
      case 'primary_expression':
        return this.value(node.namedChildren[0]);
      case 'string': {
        const s = literalString(node);
        if (s !== null) return s;
        const parts = [];
        for (const piece of stringPieces(node)) {
          if (piece.type === 'interpolation') {
            const inner = piece.node.namedChildren[0];
            const v = this.value(inner);
            parts.push(typeof v === 'string' ? v : v instanceof Expr ? v : new Expr(inner));
          } else {
            parts.push(piece.escape ? unescape(piece.text) : piece.text);
          }
        }
        return new Template(node, mergeStrings(parts));
      }
      case 'number':
        return Number(node.text);
      case 'boolean':
        return node.text === 'true';
      case 'null':
        return null;
      case 'object': {
        const out = {};
        for (const prop of node.namedChildren) {
          if (prop.type !== 'object_property') continue;
          const [key, val] = prop.namedChildren;
          if (key.type === 'resource_declaration') continue;
          const name = key.type === 'string' ? literalString(key) ?? key.text : key.text.replace(/\?$/, '');
          out[name] = this.value(val);
        }
        return out;
      }
      case 'array':
        return node.namedChildren.filter((n) => n.type !== 'decorators' && n.type !== 'comment').map((n) => this.value(n));
      case 'identifier': {
        const ref = this.refOf(node.text);
        if (ref.kind === 'var') return this.variable(node.text);
        return new Expr(node, ref);
      }
      case 'member_expression': {
        const object = this.value(node.childForFieldName('object'));
        const property = node.childForFieldName('property').text;
        if (isPlainObject(object) && property in object) return object[property];
        return new Expr(node, object instanceof Expr ? object.ref : null);
      }
      case 'subscript_expression': {
        const object = this.value(node.childForFieldName('object'));
        const index = this.value(node.childForFieldName('index'));
        if (Array.isArray(object) && typeof index === 'number') return object[index];
        if (isPlainObject(object) && typeof index === 'string') return object[index];
        return new Expr(node, object instanceof Expr ? object.ref : null);
      }
      case 'parenthesized_expression':
        if (node.namedChildren.length === 1) return this.value(node.namedChildren[0]);
        return new Expr(node);
      default:
        return new Expr(node);
    }
  }
}

function mergeStrings(parts) {
  const out = [];
  for (const p of parts) {
    if (typeof p === 'string' && typeof out[out.length - 1] === 'string') {
      out[out.length - 1] += p;
    } else {
      out.push(p);
    }
  }
  return out;
}

/** Reports whether v is a plain object produced by BicepFile.value. */
export function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Expr);
}
