// Preloaded into every test process (package.json, "tap" "test-env": NODE_OPTIONS=--import=<this file>,
// which Node runs before the command line's own --import options): keeps tap's @tapjs/processinfo from
// registering its module loader.
//
// tap runs each test file with `--import=@tapjs/processinfo/…`, which records the files a test loads
// and its coverage. Coverage is off in this project and nothing here reads that record. On Node
// versions without synchronous module hooks (before 24.13) its loader is registered with
// module.register(), and then every module the test process loads goes through a loader thread: a
// test file as small as test/cluster/breaker-hub.test.ts took 1.1 s of CPU with it and 0.6 s
// without (/usr/bin/time, this project's 2-core machine, alternated), and the suite's tests took
// 378-404 s instead of 490-503 s on one host the same day. The processes a test starts lose tap's
// option another way (./untapped.ts).
import module from 'node:module';

export interface SkippedTapLoader {
  /** processinfo's loader registrations this process refused (1 where it uses module.register()). */
  refused: number;
}

const state: SkippedTapLoader = { refused: 0 };
(globalThis as Record<symbol, unknown>)[Symbol.for('specgate.skippedTapLoader')] = state;

const register = module.register;
module.register = function registerUnlessTapLoader(this: unknown, ...args: Parameters<typeof module.register>): void {
  if (String(args[0]).includes('@tapjs/processinfo')) {
    state.refused++;
    return;
  }
  Reflect.apply(register, this, args);
} as typeof module.register;
