import type { Logger } from '../log.js';
import type { TemplateProblem } from '../routing/types.js';
import { printable } from '../text/printable.js';

/**
 * Logs the templates the router refused, per upstream, when they change: the first time, and when the
 * set differs from the one last logged. Every compile (each upstream settling, each re-discovery that
 * changed a doc) finds every upstream's refused templates again; logged at each, one upstream's four
 * bad templates made 21 warn lines in 12 s.
 */
export class TemplateProblemLog {
  /** Per upstream, the problems last logged (as a key); absent when it had none. */
  private readonly logged = new Map<string, string>();

  constructor(private readonly log: Logger) {}

  /**
   * `compiled`: the upstreams the compile read (ready ones); the others keep what was last logged, so
   * an upstream being discovered again (a reload) says nothing until it is read. `configured`: every
   * upstream of the config; one no longer there is forgotten.
   */
  report(problems: readonly TemplateProblem[], compiled: readonly string[], configured: readonly string[]): void {
    const byUpstream = new Map<string, TemplateProblem[]>();
    for (const problem of problems) {
      const list = byUpstream.get(problem.upstream);
      if (list) list.push(problem);
      else byUpstream.set(problem.upstream, [problem]);
    }
    for (const upstream of compiled) {
      const list = byUpstream.get(upstream) ?? [];
      const key = list.map((p) => `${p.method} ${p.template}\n${p.reason}`).sort().join('\n\n');
      const before = this.logged.get(upstream);
      if (key === (before ?? '')) continue;
      if (list.length === 0) {
        this.logged.delete(upstream);
        this.log.info({ upstream }, 'upstream has no endpoint left out any more');
        continue;
      }
      this.logged.set(upstream, key);
      for (const p of list) this.log.warn({ upstream: p.upstream, method: p.method, template: printable(p.template), reason: p.reason }, p.message);
    }
    for (const upstream of this.logged.keys()) if (!configured.includes(upstream)) this.logged.delete(upstream);
  }
}
