// Follows values across the Bicep files of this repository: from a module
// call in main.bicep into the module's params and outputs, and from a
// resource's `.name` to its declared name. It is what lets a check say
// "ORDER_STATUS_QUEUE in the function app is the name of the queue the
// Service Bus module creates", not just "it is some expression".

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readBicep, repoRoot, Expr, isPlainObject } from './bicep.mjs';

/**
 * A set of Bicep files read from the repository. overrides maps a
 * repository-relative path to replacement source text (used by the tests that
 * prove a check can fail).
 */
export class Project {
  static async load(overrides = {}) {
    const project = new Project(overrides);
    await project.file('infra/main.bicep');
    return project;
  }

  constructor(overrides) {
    this.overrides = overrides;
    this.files = new Map();
  }

  /** Reads (once) and returns the BicepFile at a repository-relative path. */
  async file(rel) {
    const key = path.normalize(rel);
    if (!this.files.has(key)) {
      const abs = path.join(repoRoot, key);
      const source = this.overrides[key] ?? readFileSync(abs, 'utf8');
      const file = await readBicep(abs, source);
      file.rel = key;
      this.files.set(key, file);
      for (const mod of file.modules) {
        if (mod.path && !mod.path.includes(':')) {
          await this.file(path.join(path.dirname(key), mod.path));
        }
      }
    }
    return this.files.get(key);
  }

  /** The already loaded BicepFile at rel; throws if it was never loaded. */
  get(rel) {
    const file = this.files.get(path.normalize(rel));
    if (!file) throw new Error(`not loaded: ${rel}`);
    return file;
  }

  /** The root context: main.bicep, called by nobody. */
  root() {
    return { file: this.get('infra/main.bicep'), args: null, caller: null };
  }

  /**
   * The context of module symbol called from ctx: the module file with the
   * params the call passes.
   */
  enter(ctx, symbol) {
    const mod = ctx.file.module(symbol);
    if (!mod) throw new Error(`${ctx.file.rel}: no module ${symbol}`);
    const file = this.get(path.join(path.dirname(ctx.file.rel), mod.path));
    return { file, args: mod.body.params ?? {}, caller: ctx };
  }

  /**
   * Resolves a value in ctx as far as the files allow: a param becomes the
   * argument its caller passes (or its default), `m.outputs.x` becomes the
   * module's output x, `r.name` becomes resource r's declared name. Returns
   * {value, ctx}: the resolved value and the context it was found in, so
   * an unresolvable Expr can still be inspected where it lives.
   */
  resolve(ctx, value) {
    for (let guard = 0; guard < 50; guard++) {
      if (!(value instanceof Expr)) return { value, ctx };
      const text = value.text.replace(/\s+/g, '');
      let m;
      if (value.ref?.kind === 'param' && /^\w+$/.test(text)) {
        if (ctx.args && text in ctx.args) {
          value = ctx.args[text];
          ctx = ctx.caller;
        } else if (ctx.file.params.get(text)?.defaultNode) {
          value = ctx.file.paramDefault(text);
        } else {
          return { value, ctx };
        }
      } else if ((m = /^(\w+)\.outputs\.(\w+)$/.exec(text)) && ctx.file.module(m[1])) {
        ctx = this.enter(ctx, m[1]);
        value = ctx.file.output(m[2]);
      } else if ((m = /^(\w+)\.name$/.exec(text)) && ctx.file.resource(m[1])) {
        const body = ctx.file.resource(m[1]).body;
        if (!isPlainObject(body) || !('name' in body)) return { value, ctx };
        value = body.name;
      } else {
        return { value, ctx };
      }
    }
    throw new Error(`resolve: too many steps at ${value}`);
  }

  /**
   * The context of every module file, entered from main.bicep through the
   * first module call that names it: repository-relative path -> context.
   */
  contexts() {
    const out = new Map();
    const visit = (ctx) => {
      if (out.has(ctx.file.rel)) return;
      out.set(ctx.file.rel, ctx);
      for (const mod of ctx.file.modules) visit(this.enter(ctx, mod.symbol));
    };
    visit(this.root());
    return out;
  }

  /** Every loaded file. */
  all() {
    return [...this.files.values()];
  }
}
