/**
 * The admin API, from the page (same origin: the admin API refuses requests from any other). Errors
 * carry the API's own message: Kong's `{message}` or metering's problem+json `detail`.
 */

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }
}

async function call(path, init) {
  const response = await fetch(path, { ...init, headers: { accept: 'application/json', ...init?.headers }, cache: 'no-store' });
  const text = await response.text();
  let body;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    throw new ApiError(response.status, `${path}: not JSON (${response.status})`);
  }
  if (!response.ok) throw new ApiError(response.status, body?.detail ?? body?.message ?? `${path}: ${response.status}`);
  return body;
}

export function getJson(path) {
  return call(path);
}

export function postJson(path, body) {
  return call(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

export function deletePath(path) {
  return call(path, { method: 'DELETE' });
}

/** Pages the console reads at most of one list: a bound on what a huge gateway makes the page hold. */
const MAX_PAGES = 20;

/** Every item of a Kong-style list (`{data, next}`), following `next`. */
export async function kongList(path) {
  const items = [];
  let next = `${path}${path.includes('?') ? '&' : '?'}size=1000`;
  for (let page = 0; next && page < MAX_PAGES; page++) {
    const body = await getJson(next);
    items.push(...body.data);
    next = body.next;
  }
  return items;
}

/** Every item of a metering list (`{data, meta: {page: {number, size, total}}}`). */
export async function meteringList(path) {
  const items = [];
  for (let number = 1; number <= MAX_PAGES; number++) {
    const separator = path.includes('?') ? '&' : '?';
    const body = await getJson(`${path}${separator}page%5Bsize%5D=1000&page%5Bnumber%5D=${number}`);
    items.push(...body.data);
    if (items.length >= body.meta.page.total || body.data.length === 0) break;
  }
  return items;
}

/**
 * Runs `task` now and then every `ms` (after the previous run ended, so a slow gateway is never asked
 * twice at once); a hidden tab waits until it is shown again.
 */
export function every(ms, task) {
  let timer;
  let running = false;
  const run = async () => {
    clearTimeout(timer);
    if (document.hidden || running) return;
    running = true;
    try {
      await task();
    } catch (error) {
      console.error(error);
    } finally {
      running = false;
      timer = setTimeout(run, ms);
    }
  };
  document.addEventListener('visibilitychange', () => !document.hidden && run());
  run();
  return run;
}
