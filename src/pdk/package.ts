/** The package's root folder: files of the package (a plugin's own scripts) are named from it. */
export { PACKAGE_ROOT } from '../package-root.ts';
/** The gateway's product token (`tollgate/<version>`), as it appears in `Server` and `Via` (Kong's _SERVER_TOKENS). */
export { SERVER_TOKEN } from '../proxy/respond.ts';
