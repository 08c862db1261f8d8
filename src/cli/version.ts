import { buildInfo } from '../builtins/build-info.js';

/** `gateway --version`: the gateway's version, then the runtime and native server it would run on. */
export async function runVersion(): Promise<number> {
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
