import { runPrimary } from '../cluster/primary.js';
import { UsageError } from './usage-error.js';
import { joinDashValues, parseCommandLine } from './arguments.js';

export const START_USAGE = `Usage: gateway start --config FILE [--workers N] [--port P] [--with-examples]

  --config FILE     the gateway config (JSON; default: $GATEWAY_CONFIG)
  --workers N       worker processes; 0 = one per CPU (default: config "workers")
  --port P          listening port; 0 = any free port (default: config "port")
  --with-examples   start the bundled example upstreams first (for a demo on a fresh machine)`;


function integerOption(name: string, value: string | undefined, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) > max) throw new UsageError(`--${name} must be an integer from 0 to ${max}, got "${value}"`);
  return Number(value);
}

/** `gateway start`: runs the primary until SIGTERM/SIGINT; resolves with the exit code. */
export async function runStart(argv: string[]): Promise<number> {
  const { values } = parseCommandLine({
    args: joinDashValues(argv, ['--workers', '--port']),
    options: {
      config: { type: 'string' },
      workers: { type: 'string' },
      port: { type: 'string' },
      'with-examples': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    console.log(START_USAGE);
    return 0;
  }
  const configFile = values.config ?? process.env.GATEWAY_CONFIG;
  if (!configFile) throw new UsageError('--config FILE is required (or set GATEWAY_CONFIG)');
  return runPrimary({
    configFile,
    workers: integerOption('workers', values.workers, 1024),
    port: integerOption('port', values.port, 65535),
    withExamples: values['with-examples'],
  });
}
