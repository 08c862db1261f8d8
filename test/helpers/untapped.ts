/** tap's option in NODE_OPTIONS, quoted as tap writes it ("--import=file:///…", a path may hold spaces) or bare. */
const TAP_PROCESSINFO = /"--(?:import|loader)=[^"]*@tapjs\/processinfo[^"]*"|--(?:import|loader)=\S*@tapjs\/processinfo\S*/g;
/** The test processes' own preload (./skip-tap-loader.ts, a path relative to the project): not the child's. */
const SKIP_TAP_LOADER = /--import=\S*skip-tap-loader\.js/g;

/**
 * A command line for spawn/execFile that runs `command args` without tap's module loader: the
 * gateway, the CLI or a helper script a test starts is not tap's to instrument.
 *
 * tap runs every test file with `--import=…/@tapjs/processinfo/…` and, so that coverage follows a
 * test into its children, adds the same option to the NODE_OPTIONS of every process the test spawns,
 * whatever environment the spawn gives (it hooks ChildProcess#spawn). Coverage is off in this project
 * (package.json "tap"), and on Node versions without synchronous module hooks (before 24.13) the
 * loader runs every module a process loads through a loader thread: a gateway start with two workers
 * took 5.0-5.5 s of CPU with it and 2.6-3.0 s without (`/proc` ticks until "gateway listening", same
 * machine, alternated). So the command goes through env(1), which sets NODE_OPTIONS to what it was
 * without tap's option (or unsets it) and then execs the command: the child keeps its pid, signals and
 * process group, and any NODE_OPTIONS of the user's.
 */
export function untapped(command: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): [string, string[]] {
  const kept = (env.NODE_OPTIONS ?? '').replace(TAP_PROCESSINFO, '').replace(SKIP_TAP_LOADER, '').trim();
  return ['env', [...(kept === '' ? ['-u', 'NODE_OPTIONS'] : [`NODE_OPTIONS=${kept}`]), command, ...args]];
}
