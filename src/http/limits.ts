// Size limits of a request, shared by the route step and the parser-error handler.

/** Node refuses request heads over 16 KiB (431); the target alone stops at 8 KiB. */
export const MAX_URL_LENGTH = 8192

/**
 * The largest request head the gateway sends a service: the common limit of HTTP servers.
 * A partner's request that would pass it once the gateway's own headers are added is 431.
 */
export const MAX_HEAD_BYTES = 16 * 1024
