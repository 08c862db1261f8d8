/**
 * How the forward phase's parts reach one another, so that none imports another's class: the
 * ProxiedResponse controls the upstream call through an UpstreamLeg and reads the request body
 * through a ClientBody; the BodyPump writes the body into a BodySink and refuses through a BodyOwner.
 */

/** The upstream call as the answer's side controls it. */
export interface UpstreamLeg {
  /** Nothing more is wanted from the upstream; a request not yet sent never will be. */
  abort(): void;
  /** The client caught up: read the upstream again. */
  resume(): void;
  /**
   * Drops the answer under way (nothing of it reached the client) and sends the request again to the
   * same host, with the request's headers as they are now. False when it was sent again already, or
   * its body cannot be sent twice.
   */
  sendAgain(): boolean;
}

/** Where the body pump writes a streamed request body. */
export interface BodySink {
  /** False: hold on until the call drains (the pump pauses the client). */
  writeBody(chunk: Buffer): boolean;
  endBody(): void;
}

/** Who the pump tells when it refuses the rest of a request. */
export interface BodyOwner {
  /** 413 or 408: answer so, or cut the connection if the answer had started. */
  refuse(status: number, detail: string): void;
}

/** The request body as the answer's side sees it. */
export interface ClientBody {
  onClientData(chunk: ArrayBuffer, isLast: boolean): void;
  /** The request is over: nothing more is read. */
  stop(): void;
}
