// pymdownx.arithmatex (generic) wraps maths in \( \) and \[ \] inside .arithmatex spans:
// MathJax typesets those and nothing else (code blocks keep their dollar signs).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};
