// The process model of the Node contenders of bench/proxy.ts (fastify, the naive uWS + undici
// stand-in): `processes` node:cluster workers on one port, {"ready":true} on stdout once all of them
// listen (each sends 'listening'), the whole contender gone when one worker dies (the bench sees it)
// or when the bench stops it.
import cluster from 'node:cluster';

/** In the primary: forks and supervises. In a worker: runs `startWorker`, which sends 'listening'. */
export function runClusterContender(name: string, processes: number, startWorker: () => void | Promise<void>): void {
  if (!cluster.isPrimary) {
    void startWorker();
    return;
  }
  let listening = 0;
  for (let i = 0; i < processes; i++) {
    const worker = cluster.fork();
    worker.on('message', (message: unknown) => {
      if (message === 'listening' && ++listening === processes) console.log(JSON.stringify({ ready: true }));
    });
  }
  cluster.on('exit', (_worker, code, signal) => {
    console.error(`${name} worker exited (${code ?? signal})`);
    process.exit(1);
  });
  const stop = (): void => {
    cluster.removeAllListeners('exit');
    for (const worker of Object.values(cluster.workers ?? {})) worker?.kill('SIGKILL');
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
