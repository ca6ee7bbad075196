/** The package's root folder: files of the package (a plugin's own scripts) are named from it. */
export { PACKAGE_ROOT } from '../package-root.ts';
