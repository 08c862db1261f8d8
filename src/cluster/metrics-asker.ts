/**
 * A worker's side of /metrics: asks the primary for the merged report in one format and waits for its
 * answer (src/cluster/metrics-hub.ts renders on demand). Requests that arrive while an ask for their
 * format is on its way share its answer, so a burst of scrapes costs one render. An ask the primary
 * does not answer within `timeoutMs` resolves null (the request gets a 503).
 */
import type { MetricsAnswerMessage, MetricsAskMessage } from './messages.js';

type MetricsFormat = MetricsAskMessage['format'];

export class MetricsAsker {
  private nextId = 1;
  private readonly waiting = new Map<number, (body: string | null) => void>();
  private readonly inFlight = new Map<MetricsFormat, Promise<string | null>>();

  constructor(
    /**
     * Sends the ask to the primary; false when there is no channel to it. (process.send's own false
     * only says its queue is long: the message still goes, so it is not passed on as false.)
     */
    private readonly send: (message: MetricsAskMessage) => boolean,
    readonly timeoutMs = 2000,
  ) {}

  /** The merged report in `format`, or null when the primary did not answer in time. */
  ask(format: MetricsFormat): Promise<string | null> {
    const pending = this.inFlight.get(format);
    if (pending !== undefined) return pending;
    const id = this.nextId++;
    const answer = new Promise<string | null>((resolve) => {
      const timer = setTimeout(() => settle(null), this.timeoutMs);
      const settle = (body: string | null): void => {
        clearTimeout(timer);
        this.waiting.delete(id);
        if (this.inFlight.get(format) === answer) this.inFlight.delete(format);
        resolve(body);
      };
      this.waiting.set(id, settle);
      let sent = false;
      try {
        sent = this.send({ type: 'metrics-ask', id, format });
      } catch {
        // The channel to the primary is closed.
      }
      if (!sent) queueMicrotask(() => settle(null));
    });
    this.inFlight.set(format, answer);
    return answer;
  }

  answered(message: MetricsAnswerMessage): void {
    this.waiting.get(message.id)?.(message.body);
  }
}
