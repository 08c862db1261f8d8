/**
 * The files the gateway's other processes and threads start from: the cluster's workers and the
 * primary's compile thread. Run from the bundles (`dist/bundle/`, written by src/cli/bundle-write.ts),
 * they are the sibling bundles; run from the compiled modules (`dist/src/`), the compiled modules.
 *
 * Why bundles: on Node 20 a worker spent about half its start-up in the ES module loader (resolving,
 * reading and linking some 170 files); the same code as one bundle starts in less than half the CPU
 * (docs/reference/processes.md#start-up-cost). Workers start at every launch, reload and respawn.
 */

/** Defined (true) by the bundler in the bundles; never defined in the compiled modules. */
declare const SPECGATE_BUNDLED: boolean | undefined;

/** Whether this code runs from a bundle. */
export const RUNS_BUNDLED = typeof SPECGATE_BUNDLED !== 'undefined';

// import.meta.url is this module's compiled file in both cases: the bundler rewrites it per module
// (src/cli/bundle-write.ts), so paths relative to it are the same as in dist/src/.

/** The module a cluster worker runs. */
export const WORKER_ENTRY = RUNS_BUNDLED ? new URL('../../bundle/worker.mjs', import.meta.url) : new URL('./worker.js', import.meta.url);

/** The module the primary's compile thread (piscina) runs. */
export const COMPILE_TASK_ENTRY = RUNS_BUNDLED ? new URL('../../bundle/compile-task.mjs', import.meta.url) : new URL('./compile-task.js', import.meta.url);
