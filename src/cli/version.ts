import { buildInfo } from '../builtins/build-info.js';
import { UsageError } from './usage-error.js';

/** `gateway --version`: the gateway's version, then the runtime and native server it would run on. */
export async function runVersion(argv: string[]): Promise<number> {
  if (argv.length > 0) throw new UsageError(`--version takes no argument; got "${argv[0]}"`);
  console.log(`gateway ${buildInfo().version}`);
  let uws: string;
  try {
    const { loadUws } = await import('../native/uws.js');
    const loaded = loadUws();
    uws = `${loaded.build}@${loaded.version}`;
  } catch (err) {
    uws = `none loads (${(err as Error).message.split('\n')[0]})`;
  }
  console.log(`node ${process.version}, uWebSockets.js ${uws}`);
  return 0;
}
