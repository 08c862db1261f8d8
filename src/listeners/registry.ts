/**
 * The listener types of the `listeners` config array (docs/reference/listeners.md). A type is one file exporting its
 * config schema (the keys beyond id and type) and its factory; adding a type means adding that file and
 * a line here. The built-in access log is configured apart (`accessLog.enabled`); its id, "accessLog",
 * is reserved.
 */
import type { ConfigProblem } from '../config/config-problem.js';
import { ACCESS_LOG_LISTENER } from './access-log.js';
import {
  alternateUpstreamFileProblems,
  alternateUpstreamProblems,
  alternateUpstreamSchema,
  createAlternateUpstream,
  type AlternateUpstreamConfig,
} from './alternate-upstream.js';
import type { Listener, ListenerContext } from './types.js';
import type { RequestListener } from '../exchange/listener.js';
import type { AccessLog } from './access-log.js';
import { accessLogListener } from './access-log-listener.js';
import { typedListProblems, typedListSchema, type EntryProblem, type TypeSchema } from '../config/typed-list-schema.js';

export type { AlternateUpstreamConfig } from './alternate-upstream.js';
export type { Listener, ListenerContext, ListenerMetrics } from './types.js';

/** One `listeners` entry of the config, after the schema filled its defaults. */
export type ListenerConfig = AlternateUpstreamConfig;

interface ListenerType {
  readonly schema: TypeSchema;
  /** Rules between the entry's keys that its schema cannot say (see typedListProblems). */
  problems?(config: ListenerConfig): readonly EntryProblem[];
  /**
   * The files the entry writes, checked when the config is loaded only: a directory that is missing
   * refuses the config (as for accessLog.destination). In a worker a file that cannot be opened makes
   * the listener not ready instead (logged), as when it goes away later.
   */
  fileProblems?(config: ListenerConfig): readonly EntryProblem[];
  create(config: ListenerConfig, context: ListenerContext): Listener;
}

export const LISTENER_TYPES: Readonly<Record<ListenerConfig['type'], ListenerType>> = {
  alternateUpstream: {
    schema: alternateUpstreamSchema,
    problems: (config) => alternateUpstreamProblems(config),
    fileProblems: (config) => alternateUpstreamFileProblems(config),
    create: (config, context) => createAlternateUpstream(config, context),
  },
};

function listenerType(entry: ListenerConfig): ListenerType | undefined {
  return Object.hasOwn(LISTENER_TYPES, entry.type) ? LISTENER_TYPES[entry.type] : undefined;
}

/** JSON Schema of the `listeners` array: common keys, then each type's own keys (and no others). */
export function listenersSchema(): Record<string, unknown> {
  const common = {
    id: {
      type: 'string',
      pattern: '^[A-Za-z0-9_.-]+$',
      maxLength: 64,
      description:
        'Unique name of the entry: in x-disabled-listeners lists, the health report, /metrics (listeners.<id>.*) and ' +
        'its log lines. "accessLog" is reserved for the built-in access log.',
    },
    type: { type: 'string', enum: Object.keys(LISTENER_TYPES), description: 'Which listener.' },
  };
  return typedListSchema(
    "Run for routed requests after the client's answer is over; they never delay or change it. An endpoint's " +
      'x-disabled-listeners skips the ids it lists. Ids must be unique.',
    common,
    Object.fromEntries(Object.entries(LISTENER_TYPES).map(([type, { schema }]) => [type, schema])),
  );
}

/**
 * Rules the schema cannot say, for the config's semantic checks and the worker's build: unique ids, the
 * reserved "accessLog" id, and each type's own (an alternate's serviceLocation as upstreams have it).
 * Pointers are under `/listeners`.
 */
export function checkListeners(entries: readonly ListenerConfig[]): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const first = new Map<string, number>();
  entries.forEach((entry, index) => {
    if (entry.id === ACCESS_LOG_LISTENER) {
      problems.push({ pointer: `/listeners/${index}/id`, reason: `"${ACCESS_LOG_LISTENER}" is the built-in access log's id; pick another` });
    }
    const seen = first.get(entry.id);
    if (seen === undefined) first.set(entry.id, index);
    else problems.push({ pointer: `/listeners/${index}/id`, reason: `"${entry.id}" is also the id of /listeners/${seen}; ids must be unique` });
    for (const problem of listenerType(entry)?.problems?.(entry) ?? []) problems.push({ pointer: `/listeners/${index}/${problem.key}`, reason: problem.reason });
  });
  return problems;
}

/** The files the listener entries write, for the config's checks only (see ListenerType.fileProblems). */
export function checkListenerFiles(entries: readonly ListenerConfig[]): ConfigProblem[] {
  return typedListProblems('listeners', entries, (entry) => listenerType(entry)?.fileProblems?.(entry));
}

/** The config's listener entries, each built by its type's factory (throws on an entry checkListeners refuses). */
export function buildListeners(entries: readonly ListenerConfig[], context: ListenerContext): Listener[] {
  const problems = checkListeners(entries);
  if (problems.length > 0) throw new Error(problems.map((p) => `${p.pointer}: ${p.reason}`).join('; '));
  const built: Listener[] = [];
  try {
    for (const entry of entries) built.push(LISTENER_TYPES[entry.type].create(entry, context));
  } catch (err) {
    for (const listener of built) void listener.close();
    throw err;
  }
  return built;
}

/**
 * The listeners every worker runs before the configured ones: the metrics recorder (when /metrics is
 * on) and the access log (when enabled). Together with buildListeners' they are the one list the done
 * phase walks.
 */
export function builtinListeners(metrics: RequestListener | null, accessLog: AccessLog | null): RequestListener[] {
  const list: RequestListener[] = [];
  if (metrics !== null) list.push(metrics);
  if (accessLog !== null) list.push(accessLogListener(accessLog));
  return list;
}
