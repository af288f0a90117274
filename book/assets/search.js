// search.js: search the book in the browser. The index (assets/search-index.js,
// written by book/build.py) is loaded on first use as a plain script, so this
// also works when the pages are opened straight from disk.
(function () {
  "use strict";
  var box = document.getElementById("search-box");
  var list = document.getElementById("search-results");
  if (!box || !list) return;
  var here = document.currentScript ? document.currentScript.src : "";
  var loading = null;

  function loadIndex() {
    if (window.BOOK_SEARCH) return Promise.resolve(window.BOOK_SEARCH);
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = here ? new URL("search-index.js", here).href : "assets/search-index.js";
        s.onload = function () { resolve(window.BOOK_SEARCH || []); };
        s.onerror = function () { reject(new Error("search index missing")); };
        document.head.appendChild(s);
      });
    }
    return loading;
  }

  function terms(q) {
    return q.toLowerCase().split(/\s+/).filter(function (t) { return t.length > 1; });
  }

  function score(entry, words) {
    var title = entry.s.toLowerCase(), text = entry.t.toLowerCase(), total = 0;
    for (var i = 0; i < words.length; i++) {
      var inTitle = title.indexOf(words[i]) >= 0, at = text.indexOf(words[i]);
      if (!inTitle && at < 0) return 0;
      total += (inTitle ? 10 : 0) + (at >= 0 ? 1 + Math.min(5, text.split(words[i]).length - 1) : 0);
    }
    return total;
  }

  function snippet(text, words) {
    var lower = text.toLowerCase(), at = -1;
    for (var i = 0; i < words.length && at < 0; i++) at = lower.indexOf(words[i]);
    if (at < 0) return text.slice(0, 120);
    var start = Math.max(0, at - 50);
    return (start > 0 ? "…" : "") + text.slice(start, at + 90) + "…";
  }

  function mark(node, text, words) {
    var pattern = new RegExp("(" + words.map(function (w) {
      return w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    }).join("|") + ")", "gi");
    text.split(pattern).forEach(function (part, i) {
      if (i % 2) { var m = document.createElement("mark"); m.textContent = part; node.appendChild(m); }
      else node.appendChild(document.createTextNode(part));
    });
  }

  function show(index, query) {
    var words = terms(query);
    list.textContent = "";
    if (!words.length) { list.hidden = true; return; }
    var hits = index.map(function (e) { return [score(e, words), e]; })
      .filter(function (h) { return h[0] > 0; })
      .sort(function (a, b) { return b[0] - a[0]; })
      .slice(0, 12);
    if (!hits.length) {
      var li = document.createElement("li");
      li.className = "empty";
      li.textContent = "Nothing found for “" + query + "”.";
      list.appendChild(li);
    }
    hits.forEach(function (h) {
      var e = h[1], li = document.createElement("li"), a = document.createElement("a");
      a.href = e.u;
      var title = document.createElement("strong");
      mark(title, e.s, words);
      a.appendChild(title);
      if (e.s !== e.p) {
        var where = document.createElement("span");
        where.className = "where";
        where.textContent = e.p;
        a.appendChild(where);
      }
      var snip = document.createElement("span");
      snip.className = "snippet";
      mark(snip, snippet(e.t, words), words);
      a.appendChild(snip);
      li.appendChild(a);
      list.appendChild(li);
    });
    list.hidden = false;
  }

  function update() {
    var q = box.value;
    loadIndex().then(function (index) { if (box.value === q) show(index, q); },
                     function () { list.hidden = true; });
  }

  box.addEventListener("focus", loadIndex, { once: true });
  box.addEventListener("input", update);
  box.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape") { box.value = ""; list.hidden = true; }
    if (ev.key === "Enter") {
      var first = list.querySelector("a");
      if (first) window.location.href = first.href;
    }
    if (ev.key === "ArrowDown") {
      var a = list.querySelector("a");
      if (a) { a.focus(); ev.preventDefault(); }
    }
  });
  document.addEventListener("click", function (ev) {
    if (!list.contains(ev.target) && ev.target !== box) list.hidden = true;
  });
})();
