import { createRequire } from 'node:module';
import type * as PiscinaModule from 'piscina';
import { COMPILE_TASK_ENTRY } from './entry-files.js';
import type { CompileInput, CompileOutput } from './compile-task.js';

// Required when the primary loads this module, not before: the bundles leave piscina to Node, and a
// statically imported external would be loaded by every CLI command (src/cli/bundle-write.ts).
const { Piscina } = createRequire(import.meta.url)('piscina') as typeof PiscinaModule;

/**
 * Tables of at most this many endpoints compile on the primary's own thread. Measured on the 2-core
 * host (2026-11-28): the compile task takes 7 ms for 10 endpoints, 22 ms for 100 (8 upstreams), 119 ms
 * for 1,000, 362 ms for 3,000; starting the piscina thread costs 0.12-0.2 s of CPU (Node's bootstrap of
 * a thread, and the task's bundle loaded there) and about 0.3 s before the first table, again each
 * time it comes back after its idle timeout. Up to 100 endpoints the event loop is held about as long
 * as a /metrics render; larger tables would hold it for longer, so they go to the thread.
 */
export const INLINE_MAX_ENDPOINTS = 100;

export type CompilePlace = 'inline' | 'thread';
type CompileTask = (input: CompileInput) => Promise<CompileOutput>;

/**
 * Runs the compile task (compile-task.ts) where it costs least: small work in the primary, heavy work
 * off its event loop on one piscina thread. Work that checks docs with objections against the spec
 * schemas (the /spec guard: dereferencing and validation, unbounded by the endpoint count) always goes
 * to the thread.
 */
export class CompileRunner {
  private pool: PiscinaModule.Piscina<CompileInput, CompileOutput> | null = null;
  private inline: Promise<CompileTask> | null = null;

  /** `only`: every compile there, whatever its size (tests compare the two places). */
  constructor(private readonly only?: CompilePlace) {}

  /** Where `input` compiles. */
  placeOf(input: CompileInput): CompilePlace {
    if (this.only !== undefined) return this.only;
    let endpoints = 0;
    for (const upstream of input.upstreams) {
      if ((upstream.problems?.length ?? 0) > 0) return 'thread';
      endpoints += upstream.entries.length;
    }
    return endpoints <= INLINE_MAX_ENDPOINTS ? 'inline' : 'thread';
  }

  /** `place`: placeOf(input), when the caller has it already. */
  run(input: CompileInput, place = this.placeOf(input)): Promise<CompileOutput> {
    if (place === 'thread') return this.threads().run(input);
    // The same module the thread runs: the task's bundle, loaded once (about 65 ms), or the compiled module.
    this.inline ??= import(COMPILE_TASK_ENTRY.href).then((task: { default: CompileTask }) => task.default);
    return this.inline.then((compile) => compile(input));
  }

  async close(): Promise<void> {
    await this.pool?.close({ force: true });
  }

  private threads(): PiscinaModule.Piscina<CompileInput, CompileOutput> {
    return (this.pool ??= new Piscina({ filename: COMPILE_TASK_ENTRY.href, minThreads: 0, maxThreads: 1, idleTimeout: 10_000 }));
  }
}
