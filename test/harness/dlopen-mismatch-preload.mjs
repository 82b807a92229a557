/**
 * Test seam, loaded with `node --import` before the built CLI or library: loading better-sqlite3's
 * native addon fails exactly as it does when the addon was built for another Node.js (the error
 * Node's loader throws then: code ERR_DLOPEN_FAILED and its message with both NODE_MODULE_VERSION
 * numbers). Every other addon loads as usual.
 */
const dlopen = process.dlopen;
process.dlopen = function (module, filename, ...rest) {
  if (String(filename).endsWith('better_sqlite3.node')) {
    const err = new Error(
      `The module '${filename}'\nwas compiled against a different Node.js version using\nNODE_MODULE_VERSION 115. This version of Node.js requires\nNODE_MODULE_VERSION ${process.versions.modules}. Please try re-compiling or re-installing\nthe module (for instance, using \`npm rebuild\` or \`npm install\`).`,
    );
    err.code = 'ERR_DLOPEN_FAILED';
    throw err;
  }
  return dlopen.call(this, module, filename, ...rest);
};
