// Size limits of a request, shared by the route step and the parser-error handler.

/** Node refuses request heads over 16 KiB (431); the target alone stops at 8 KiB. */
export const MAX_URL_LENGTH = 8192
