// Every top-level config setting says how a reload applies it: restart only, by replacing the workers
// (read once at worker start), or on the running workers. A setting in none of the lists would be
// taken by a reload and silently not applied (upstreamPool was, until it joined WORKER_START).
import t from 'tap';
import { configSchema } from '../../src/config/schema.js';
import { APPLIED_LIVE, RESTART_ONLY, WORKER_START } from '../../src/cluster/reloader.js';

t.test('each top-level setting is in exactly one of RESTART_ONLY, WORKER_START and APPLIED_LIVE', async (t) => {
  const listed: string[] = [...RESTART_ONLY, ...WORKER_START, ...APPLIED_LIVE];
  const settings = Object.keys(configSchema.properties);
  t.same(settings.filter((key) => !listed.includes(key)), [], 'none left out');
  t.same(listed.filter((key) => !settings.includes(key)), [], 'none that is not a setting');
  t.same(listed.filter((key, i) => listed.indexOf(key) !== i), [], 'none in two lists');
});
