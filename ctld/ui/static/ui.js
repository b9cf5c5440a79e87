// Tide dashboard: signs in from a link's fragment, and refreshes the
// page's main part every few seconds while the page is visible.
'use strict';
(function () {
  // A login link (/ui/login#token=...) carries the token in its
  // fragment, which browsers never send to a server: fill the form with
  // it, drop it from the address bar and history, and submit.
  var form = document.getElementById('login');
  if (form) {
    var m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (m) {
      history.replaceState(null, '', location.pathname + location.search);
      form.elements.token.value = decodeURIComponent(m[1]);
      form.submit();
    }
    return;
  }
  var main = document.getElementById('main');
  var every = main ? Number(main.dataset.poll) * 1000 : 0;
  if (!every) {
    return;
  }
  var etag = main.dataset.etag || '';
  var live = document.getElementById('live');
  var stamp = document.getElementById('updated');
  var timer = null;
  var stopped = false;

  function schedule() {
    if (!timer && !stopped) {
      timer = setTimeout(refresh, every);
    }
  }

  function stale(on) {
    if (live) {
      live.classList.toggle('stale', on);
    }
  }

  function refresh() {
    timer = null;
    if (document.hidden) {
      return; // visibilitychange resumes
    }
    var url = new URL(location.href);
    url.searchParams.set('part', 'main');
    var headers = { 'X-Tide-UI': 'refresh' };
    if (etag) {
      headers['If-None-Match'] = etag;
    }
    fetch(url, { headers: headers, credentials: 'same-origin', cache: 'no-store', redirect: 'manual' })
      .then(function (r) {
        if (r.status === 401 || r.type === 'opaqueredirect') {
          stopped = true;
          stale(true);
          if (live) {
            live.textContent = 'signed out: reload to sign in again';
          }
          return;
        }
        if (r.status === 304) {
          stale(false);
          stamp.textContent = new Date().toLocaleTimeString();
          return;
        }
        if (!r.ok) {
          stale(true);
          return;
        }
        return r.text().then(function (html) {
          var focus = document.activeElement && main.contains(document.activeElement) && document.activeElement.name;
          if (focus) {
            return; // do not pull a field from under the reader's cursor
          }
          etag = r.headers.get('ETag') || '';
          // Keep what the reader opened.
          var open = Array.prototype.map.call(main.querySelectorAll('details[open][id]'), function (d) { return d.id; });
          main.innerHTML = html;
          open.forEach(function (id) {
            var d = document.getElementById(id);
            if (d) { d.open = true; }
          });
          stale(false);
          stamp.textContent = new Date().toLocaleTimeString();
        });
      })
      .catch(function () { stale(true); })
      .then(schedule);
  }

  document.addEventListener('visibilitychange', function () {
    if (!document.hidden && !timer) {
      refresh();
    }
  });
  schedule();
})();
