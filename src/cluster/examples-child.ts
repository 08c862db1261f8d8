// Child process of `gateway start --with-examples`: runs the bundled example upstreams until its parent goes.
import { startExampleUpstreams } from '../../examples/upstreams.js';

// A failure goes to the parent, which reports it (one line, no stack trace) and exits.
const examples = await startExampleUpstreams().catch((err: Error) => {
  if (process.send) process.send({ type: 'examples-failed', reason: err.message }, () => process.exit(1));
  else process.exit(1);
  return new Promise<never>(() => {});
});
// With a callback: an EPIPE (the parent gone before its disconnect is seen) is then not an uncaught exception.
process.send?.({ type: 'examples-ready', servers: examples.servers }, undefined, undefined, () => {});

async function stop(): Promise<void> {
  try {
    await examples.close();
  } finally {
    process.exit(0);
  }
}

process.on('disconnect', () => void stop());
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => {
  // The parent's Ctrl-C reaches the whole group; the parent decides when the examples stop.
});
