// Child process of `gateway start --with-examples`: runs the bundled example upstreams until its parent goes.
import { startExampleUpstreams } from '../../examples/upstreams.js';

const examples: unknown = await startExampleUpstreams();
process.send?.({ type: 'examples-ready' });

async function stop(): Promise<void> {
  const closable = examples as { close?: () => unknown } | null;
  try {
    if (closable && typeof closable.close === 'function') await closable.close();
  } finally {
    process.exit(0);
  }
}

process.on('disconnect', () => void stop());
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => {
  // The parent's Ctrl-C reaches the whole group; the parent decides when the examples stop.
});
