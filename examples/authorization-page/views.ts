/** The page's HTML. Every dynamic value goes through `escapeHtml`. */
import type { Application } from './gateway-client.ts';

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; background: #f4f5f7; margin: 0; }
  main { max-width: 26rem; margin: 4rem auto; background: #fff; padding: 2rem; border-radius: 8px; box-shadow: 0 1px 4px #0002; }
  h1 { font-size: 1.3rem; margin-top: 0; }
  label { display: block; margin: .8rem 0 .2rem; }
  input[type=text], input[type=password] { width: 100%; box-sizing: border-box; padding: .5rem; }
  button { margin-top: 1.2rem; padding: .5rem 1.2rem; font-size: 1rem; }
  .error { color: #a00; }
  .scopes li { font-family: monospace; }
</style>
</head>
<body><main>
${body}
</main></body>
</html>`;
}

const hidden = (name: string, value: string) => `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;

export function loginPage(requestId: string, csrf: string, error?: string): string {
  return layout(
    'Sign in',
    `<h1>Sign in</h1>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/login">
  ${hidden('request', requestId)}
  ${hidden('csrf', csrf)}
  <label for="username">Username</label>
  <input id="username" name="username" type="text" autocomplete="username" required autofocus>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button id="sign-in" type="submit">Sign in</button>
</form>`,
  );
}

export function consentPage(app: Application, user: string, scopes: string[], requestId: string, csrf: string): string {
  const scopeList = scopes.length
    ? `<p>It asks for:</p><ul class="scopes">${scopes.map((s) => `<li>${escapeHtml(s)}</li>`).join('')}</ul>`
    : '<p>It asks for no particular scope.</p>';
  return layout(
    'Authorize application',
    `<h1>Authorize <span id="app-name">${escapeHtml(app.name)}</span>?</h1>
<p>Made by <strong id="developer-name">${escapeHtml(app.developer)}</strong>, it wants to access your account
<strong id="user-name">${escapeHtml(user)}</strong>.</p>
${scopeList}
<form method="post" action="/consent">
  ${hidden('request', requestId)}
  ${hidden('csrf', csrf)}
  <button id="approve" type="submit" name="decision" value="approve">Approve</button>
  <button id="deny" type="submit" name="decision" value="deny">Deny</button>
</form>`,
  );
}

export function errorPage(title: string, message: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1><p class="error" role="alert">${escapeHtml(message)}</p>`);
}

export function homePage(): string {
  return layout(
    'Authorization page',
    `<h1>Authorization page</h1>
<p>Client applications send users to <code>/authorize?response_type=code&amp;client_id=…</code> to ask for their consent.</p>`,
  );
}
